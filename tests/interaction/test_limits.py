"""Size limits on a question, an ask_user form and an answer (issue 23, item 12): each refusal
says the limit, and nothing is stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deeptutor_jupyter import limits
from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.interaction.answers import InvalidAnswer, check_types
from deeptutor_jupyter.interaction.schema import AskUserTool
from deeptutor_jupyter.providers import ToolCall
from deeptutor_jupyter.runtime.plan import PlanError
from deeptutor_jupyter.runtime.session import TutorSession
from deeptutor_jupyter.tools import ToolRegistry


def ask_error(arguments: dict[str, object]) -> str:
    registry = ToolRegistry()
    registry.register(AskUserTool())
    checked = registry.validate(ToolCall("c1", "ask_user", json.dumps(arguments)))
    assert not isinstance(checked, tuple), "the form should have been refused"
    assert checked.is_error
    return checked.content


def test_an_ask_user_form_over_its_limits_is_refused_to_the_model_with_the_limit() -> None:
    option = {"id": "a", "label": "A"}
    base = {"title": "Which?", "mode": "single", "options": [option]}
    cases = [
        ({**base, "title": "t" * 2_000_000}, "title", limits.ASK_TITLE_CHARS),
        ({**base, "description": "d" * 10_000}, "description", limits.ASK_DESCRIPTION_CHARS),
        (
            {**base, "options": [{"id": f"o{i}", "label": "x"} for i in range(60)]},
            "options",
            limits.ASK_OPTIONS,
        ),
        (
            {**base, "options": [{"id": "a", "label": "l" * 600}]},
            "options.0.label",
            limits.ASK_OPTION_LABEL_CHARS,
        ),
        (
            {**base, "options": [{"id": "a", "label": "A", "description": "d" * 3000}]},
            "options.0.description",
            limits.ASK_OPTION_DESCRIPTION_CHARS,
        ),
    ]
    for arguments, field, limit in cases:
        content = ask_error(arguments)
        assert f"field {field!r}" in content and f"at most {limit} " in content, content
    assert len(ask_error({**base, "title": "t" * 2_000_000})) < 1000  # the title is not echoed


def test_a_free_text_answer_over_the_limit_is_refused_with_the_limit() -> None:
    with pytest.raises(InvalidAnswer, match=f"the limit is {limits.ANSWER_CHARS:,} characters"):
        check_types([], "x" * 30_000_000, False)
    with pytest.raises(InvalidAnswer, match=f"the limit is {limits.ANSWER_SELECTIONS} selections"):
        check_types(["a"] * (limits.ANSWER_SELECTIONS + 1), "", False)
    check_types(["a"], "x" * limits.ANSWER_CHARS, False)


def test_a_question_over_the_limit_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    home = tmp_path / "home"
    resolved = resolve_settings(environ={"DEEPTUTOR_HOME": str(home)})
    session = TutorSession("lesson.ipynb", resolve=lambda _flags: resolved)
    with pytest.raises(PlanError, match=f"the limit is {limits.QUESTION_CHARS:,} characters"):
        session.ask("q" * 20_000_000, resolved)
    assert not (home / "state.db").exists()


async def test_a_host_says_the_question_limit_as_its_own_error(tmp_path: Path) -> None:
    from deeptutor_jupyter.hosts.tutor_host import HostError, TutorHost

    env = {
        "DEEPTUTOR_HOME": str(tmp_path / "home"),
        "DEEPTUTOR_BASE_URL": "http://127.0.0.1:9/v1",  # never reached: refused before
        "DEEPTUTOR_MODEL": "m",
    }
    session = TutorSession("mcp-host", resolve=lambda _flags: resolve_settings(environ=env))
    with pytest.raises(HostError, match=f"the limit is {limits.QUESTION_CHARS:,} characters"):
        await TutorHost(session).ask("q" * (limits.QUESTION_CHARS + 1))
