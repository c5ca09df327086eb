"""ask_user's seven modes as an MCP elicitation form, and the form's answer as a submission.

One field, ``answer``, carries the choice or the value: single as a string enum (option labels as
titles), multiple and toggle as an array of them, number as a number, date as a ``date`` string,
text and directory as a string. ``allowCustom`` adds an optional ``other`` text field.
"""

from __future__ import annotations

from typing import Any


def form_of(payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The elicitation's message and requested schema for an ask_user payload."""
    mode = payload.get("mode", "text")
    options = [{"const": o["id"], "title": o["label"]} for o in payload.get("options", [])]
    answer: dict[str, Any]
    if mode == "single":
        answer = {"type": "string", "oneOf": options}
    elif mode in ("multiple", "toggle"):
        answer = {
            "type": "array",
            "items": {"anyOf": options},
            "minItems": 0 if payload.get("allow_custom") else 1,
        }
    elif mode == "number":
        answer = {"type": "number"}
    elif mode == "date":
        answer = {"type": "string", "format": "date"}
    else:
        answer = {"type": "string"}
    answer["title"] = payload.get("submit_label") or "Answer"
    if mode == "directory":
        answer["description"] = "A folder, relative to the notebook's folder."
    if payload.get("description"):
        answer["description"] = payload["description"]
    properties: dict[str, Any] = {"answer": answer}
    required = ["answer"]
    if payload.get("allow_custom") and options:
        properties["other"] = {"type": "string", "title": "Other (your own answer)"}
        required = []
    schema = {"type": "object", "properties": properties, "required": required}
    return payload.get("title", "The tutor asks"), schema


def submission_of(payload: dict[str, Any], content: dict[str, Any] | None) -> tuple[list[str], str]:
    """(selections, custom_input) for an accepted form's content."""
    content = content or {}
    value = content.get("answer")
    other = str(content.get("other") or "")
    if payload.get("mode") in ("single", "multiple", "toggle"):
        picked = value if isinstance(value, list) else ([value] if value else [])
        return [str(v) for v in picked], other
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return [], "" if value is None else str(value)
