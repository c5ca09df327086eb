"""The schemas a chat turn sends, saved with the package (tools/schema_file.py, issue 28): the
file is what the code builds, and only a tool made exactly as saved takes its schema from it."""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from deeptutor_jupyter.interaction.quiz import MakeQuizTool
from deeptutor_jupyter.kernel.warm import REQUEST_MODULES, sent_tools
from deeptutor_jupyter.tools import schema_file
from deeptutor_jupyter.tools.registry import _SCHEMAS, schema_of
from deeptutor_jupyter.tools.schema_file import entry, packaged, saved_schema


def test_the_saved_file_is_what_the_code_builds() -> None:
    # Fails when a sent tool's arguments, name or description changed and the file was not
    # written again: python -m deeptutor_jupyter.kernel.warm
    for name in REQUEST_MODULES:
        importlib.import_module(name)
    built = {cls.name: entry(cls) for cls in sent_tools()}
    assert {"make_quiz", "ask_user", "search_knowledge"} <= set(built)
    assert packaged() == built


def test_a_sent_tool_takes_its_schema_from_the_file() -> None:
    _SCHEMAS.clear()
    schema = schema_of(MakeQuizTool())
    assert schema is packaged()["make_quiz"]["schema"]
    assert schema == MakeQuizTool.schema()


class OtherArgs(BaseModel):
    topic: str


class OtherQuiz(MakeQuizTool):
    Args: ClassVar[type[Any]] = OtherArgs  # type: ignore[misc]


def test_a_tool_made_otherwise_builds_its_own_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    _SCHEMAS.clear()
    assert saved_schema(OtherQuiz()) is None  # another class (and arguments) of the same name
    assert schema_of(OtherQuiz())["function"]["parameters"]["required"] == ["topic"]
    # e.g. a description changed by a later version of the code, the file not written again
    monkeypatch.setattr(MakeQuizTool, "description", "Quiz the learner.")
    assert saved_schema(MakeQuizTool()) is None
    assert schema_of(MakeQuizTool())["function"]["description"] == "Quiz the learner."


class WiderQuiz(MakeQuizTool):
    """The same name, description and arguments, but a schema of its own."""

    @classmethod
    def schema(cls) -> dict[str, Any]:
        schema = MakeQuizTool.schema()
        return {**schema, "function": {**schema["function"], "strict": True}}


def test_each_part_of_the_match_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    # Another class, though its name, description and arguments are the saved ones.
    _SCHEMAS.clear()
    assert saved_schema(WiderQuiz()) is None
    assert schema_of(WiderQuiz())["function"]["strict"] is True
    # The saved class, with other arguments (a tool made with its own Args).
    other = MakeQuizTool()
    other.Args = OtherArgs
    assert saved_schema(other) is None
    # An entry whose schema names another tool (a file edited by hand): not used.
    entries = {name: dict(value) for name, value in packaged().items()}
    saved = entries["make_quiz"]["schema"]
    entries["make_quiz"]["schema"] = {**saved, "function": {**saved["function"], "name": "quiz"}}
    monkeypatch.setattr(schema_file, "packaged", lambda: entries)
    assert saved_schema(MakeQuizTool()) is None
