"""An MCP elicitation form as ask_user questions, one per field, and the answers as its content
in the field's own JSON types."""

from __future__ import annotations

from deeptutor_jupyter.interaction.schema import AskUserArgs
from deeptutor_jupyter.tools.mcp.elicit import answer_of, questions_of

SCHEMA = {
    "type": "object",
    "properties": {
        "level": {"type": "integer", "enum": [1, 2, 3], "title": "Level"},
        "topics": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}},
        "graded": {"type": "boolean", "title": "Graded?"},
        "hours": {"type": "number"},
        "due": {"type": "string", "format": "date"},
        "note": {"type": "string", "description": "Anything else"},
    },
}


def test_each_field_is_a_valid_ask_user_question_and_answers_keep_their_types() -> None:
    questions = questions_of("calc", "Set up the course", SCHEMA)
    modes = [AskUserArgs.model_validate(q).mode for q in questions]  # each one is valid
    assert modes == ["single", "multiple", "single", "number", "date", "text"]
    assert questions[0]["title"] == "Set up the course (Level)"
    assert "Asked by the MCP server 'calc'." in questions[0]["description"]
    answers = [
        {"selections": ["2"]},
        {"selections": ["a"]},
        {"selections": ["yes"]},
        {"customInput": "1.5"},
        {"customInput": "2026-12-24"},
        {"customInput": "none"},
    ]
    assert answer_of(SCHEMA, answers) == {
        "level": 2,
        "topics": ["a"],
        "graded": True,
        "hours": 1.5,
        "due": "2026-12-24",
        "note": "none",
    }
