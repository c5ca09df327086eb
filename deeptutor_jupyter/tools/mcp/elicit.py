"""An MCP elicitation (a flat form of primitive fields) as ask_user questions, one per field.

Each question is an ordinary ask_user pending interaction (interaction/pending.py): durable,
answerable from any surface, consumed once. Enums become single choices, arrays of enums multiple
choices, booleans a yes/no choice, numbers and dates their own modes, strings free text.
"""

from __future__ import annotations

from typing import Any

YES, NO = "yes", "no"


def questions_of(server: str, message: str, schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The ask_user arguments for each field of the requested schema, in order."""
    properties: dict[str, Any] = schema.get("properties") or {}
    many = len(properties) > 1
    questions = []
    for name, prop in properties.items():
        label = prop.get("title") or prop.get("description") or name
        title = f"{message} ({label})" if many else message
        about = prop.get("description", "") if prop.get("title") else ""
        question = {
            "title": title[:300] or f"{server} asks",
            "description": f"Asked by the MCP server {server!r}. {about}".strip(),
            **_control(prop),
        }
        questions.append(question)
    return questions


def _control(prop: dict[str, Any]) -> dict[str, Any]:
    kind = prop.get("type")
    choices = _choices(prop)
    if choices:
        return {"mode": "single", "options": choices}
    if kind == "array":
        items = _choices(prop.get("items") or {})
        if items:
            return {"mode": "multiple", "options": items}
    if kind == "boolean":
        return {
            "mode": "single",
            "options": [{"id": YES, "label": "Yes"}, {"id": NO, "label": "No"}],
        }
    if kind in ("number", "integer"):
        return {"mode": "number"}
    if kind == "string" and prop.get("format") == "date":
        return {"mode": "date"}
    return {"mode": "text"}


def _choices(prop: dict[str, Any]) -> list[dict[str, str]]:
    if "enum" in prop:
        names = prop.get("enumNames") or []
        return [
            {"id": str(v), "label": str(names[i]) if i < len(names) else str(v)}
            for i, v in enumerate(prop["enum"])
        ]
    one_of = prop.get("oneOf") or prop.get("anyOf") or []
    return [
        {"id": str(o["const"]), "label": str(o.get("title", o["const"]))}
        for o in one_of
        if isinstance(o, dict) and "const" in o
    ]


def answer_of(schema: dict[str, Any], answers: list[dict[str, Any]]) -> dict[str, Any]:
    """The elicitation's content from the learner's answers (ask_user results, in field order)."""
    content: dict[str, Any] = {}
    for (name, prop), answer in zip(
        (schema.get("properties") or {}).items(), answers, strict=False
    ):
        picked = list(answer.get("selections") or [])
        text = str(answer.get("customInput") or "")
        kind = prop.get("type")
        if kind == "boolean":
            content[name] = picked[:1] == [YES]
        elif kind == "array":
            content[name] = picked
        elif picked:
            content[name] = _typed(kind, picked[0])
        else:
            content[name] = _typed(kind, text)
    return content


def _typed(kind: Any, text: str) -> Any:
    """An answer as the field's JSON type (an enum of numbers gets a number back)."""
    if kind == "integer":
        return int(float(text))
    if kind == "number":
        return float(text)
    return text
