"""The schemas a chat turn sends, saved with the package (tools/schema_file.py, issue 28): the
file is what the code builds, and only a tool made exactly as saved takes its schema from it."""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from deeptutor_jupyter.interaction.quiz import MakeQuizTool
from deeptutor_jupyter.kernel.warm import REQUEST_MODULES, sent_tools
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
