"""The words sent to the model by consolidation: one system prompt per mode and document."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from deeptutor_jupyter.memory.document import MAX_TEXT
from deeptutor_jupyter.memory.trace import TraceRecord

_PURPOSE = {
    "recent": "what the learner worked on recently, newest first in spirit",
    "profile": "who the learner is: level, background, strengths, recurring misconceptions",
    "scope": "what the learner is studying: courses, topics, goals and deadlines",
}

_SCHEMA = f"""Reply with JSON only, exactly {{"ops": [...]}}, where each op is one of:
{{"op": "add", "section": "<section name>", "text": "<one line>", "refs": ["<trace id>"]}}
{{"op": "edit", "id": "m_<id>", "text": "<one line>", "refs": ["<trace id>"]}}
{{"op": "delete", "id": "m_<id>", "reason": "contradicted" | "superseded" | "stale" | "low-signal"}}
Rules: text is one plain line of at most {MAX_TEXT} characters; every add and edit cites the trace
ids it rests on in refs (ids from the evidence or refs the entry already has); ids are the m_...
shown before each line. Reply {{"ops": []}} when nothing should change."""

_TASK = {
    "update": (
        "Read the new traces and record what is worth remembering for future tutoring. Add "
        "durable facts; edit an existing line when a trace refines it (keep its refs and add the "
        "new ones); never restate what a line already says. Skip small talk."
    ),
    "audit": (
        "Check each line against the evidence it cites. Edit a line the evidence supports only "
        "in part; delete one the evidence contradicts (reason contradicted) or that says nothing "
        "useful (reason low-signal). Leave supported lines alone."
    ),
    "dedup": (
        "Find lines that say the same thing. Keep one: edit it to the clearest wording with the "
        "union of the refs, and delete the others with reason superseded. Leave distinct lines "
        "alone."
    ),
}


def mode_prompt(mode: str, layer: str, key: str) -> str:
    if layer == "L2":
        purpose = f"what happened on the {key} surface: topics, difficulties, progress"
    else:
        purpose = _PURPOSE.get(key, key)
    return (
        f"You maintain one memory document about a learner, {layer}/{key}.md: {purpose}.\n"
        f"{_TASK[mode]}\n\n{_SCHEMA}"
    )


def trace_lines(records: Iterable[TraceRecord]) -> str:
    """Traces as compact JSON lines: only what a summary may rest on, never raw answers."""
    lines = []
    for record in records:
        item: dict[str, Any] = {
            "trace_id": record.trace_id,
            "surface": record.surface,
            "kind": record.kind,
            "question": record.question[:500],
            "answer_summary": record.answer_summary,
            "tools": record.tools,
        }
        if record.ask_user:
            item["ask_user"] = record.ask_user
        lines.append(json.dumps(item, ensure_ascii=False))
    return "\n".join(lines)
