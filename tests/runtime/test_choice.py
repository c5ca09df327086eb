"""The conversation's model and knowledge bases (runtime/choice.py), in-process on a real store
and the fake model server: what may be chosen, what is refused in words, that the choice is kept
for the conversation and used by its next turns (the request's model, the turn's trace)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from deeptutor_jupyter.agent.events import TurnStarted
from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.knowledge import KnowledgeBase
from deeptutor_jupyter.runtime.choice import ChoiceError
from deeptutor_jupyter.runtime.orchestrator import Turn
from deeptutor_jupyter.runtime.plan import PlanError
from deeptutor_jupyter.runtime.session import AskOptions, TutorSession
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.runtime.fake_model_env import use_fake_model


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer) -> Path:
    use_fake_model(monkeypatch, tmp_path / "home", server.url)
    monkeypatch.setenv("DEEPTUTOR_MODELS", "fake-large, fake-small")
    monkeypatch.chdir(tmp_path)  # the workspace, where a TUTOR.md is looked for
    notes = tmp_path / "notes.md"
    notes.write_text("# Rank\n\nThe rank of a matrix counts its pivots.\n", encoding="utf-8")
    KnowledgeBase(tmp_path / "home", "linalg").add_sources([notes])
    return tmp_path / "home"


def session_of(notebook: str = "lesson.ipynb") -> TutorSession:
    """An open session (its conversation id is known once its store is open)."""
    session = TutorSession(notebook, resolve=lambda f: resolve_settings(flags=f))
    session.open(session.resolve({}))
    return session


async def finish(session: TutorSession, turn: Turn) -> None:
    assert turn.task is not None
    await asyncio.wait_for(asyncio.wait([turn.task]), 20)
    for model in session.models.values():
        await model.aclose()


def test_the_chooser_offers_names_only_and_keeps_the_choice(home: Path) -> None:
    session = session_of()
    resolved = session.resolve({})
    offered = session.choices(resolved)
    assert offered["models"] == ["fake", "fake-large", "fake-small"]
    assert offered["default_model"] == "fake" and offered["kbs"] == ["linalg"]
    assert offered["choice"] == {"model": None, "kbs": []}

    session.choose(resolved, session.session_id, "fake-large", ["linalg"])
    again = session_of()  # a restarted kernel of the same notebook
    assert again.choices(again.resolve({}))["choice"] == {"model": "fake-large", "kbs": ["linalg"]}
    session.close()
    again.close()


@pytest.mark.parametrize(
    ("model", "kbs", "words"),
    [
        ("gpt-5", [], "'gpt-5' is not one you can use here. Available: fake, fake-large"),
        (None, ["physics"], "No knowledge base named physics. Known: linalg"),
    ],
)
def test_an_unknown_model_or_knowledge_base_is_refused_and_nothing_changes(
    home: Path, model: str | None, kbs: list[str], words: str
) -> None:
    session = session_of()
    resolved = session.resolve({})
    session.choose(resolved, session.session_id, "fake-small", [])
    with pytest.raises(ChoiceError, match=words):
        session.choose(resolved, session.session_id, model, kbs)
    assert session.choices(resolved)["choice"] == {"model": "fake-small", "kbs": []}
    session.close()


def test_another_notebooks_conversation_cannot_be_chosen_for(home: Path) -> None:
    other = session_of("other.ipynb")
    session = session_of()
    with pytest.raises(ChoiceError, match="No such conversation in this notebook"):
        session.choose(session.resolve({}), other.session_id, "fake-large", [])
    assert other.choices(other.resolve({}))["choice"] == {"model": None, "kbs": []}
    session.close()
    other.close()


async def test_the_next_turns_use_the_choice_and_their_trace_says_so(
    home: Path, server: FakeLLMServer
) -> None:
    server.extend([Reply(text="Pivots."), Reply(text="Still pivots."), Reply(text="Own.")])
    session = session_of()
    resolved = session.resolve({})
    session.choose(resolved, session.session_id, "fake-large", ["linalg"])

    turn = session.ask("What is rank?", resolved, AskOptions())
    await finish(session, turn)
    assert server.requests[-1].body["model"] == "fake-large"
    said = session.events_of(turn)  # a finished turn's events are read from the store
    started = next(e.body for e in said if isinstance(e.body, TurnStarted))
    assert isinstance(started, TurnStarted)
    assert (started.model.endswith("fake-large"), started.kbs) == (True, ["linalg"])
    assert turn.trace is not None and turn.trace.kbs == ["linalg"]
    assert "fake-large" in turn.trace.model
    system = server.requests[-1].body["messages"][0]["content"]
    assert "Knowledge bases selected for this turn: linalg" in system

    # A cell's own --model wins for that cell; the conversation keeps its choice.
    own = session.resolve({"model": "fake-small"})
    turn = session.ask("And now?", own, AskOptions())
    await finish(session, turn)
    assert server.requests[-1].body["model"] == "fake-small"
    session.close()


async def test_a_policy_that_names_models_narrows_the_choice_and_is_obeyed(
    home: Path, tmp_path: Path
) -> None:
    (tmp_path / "TUTOR.md").write_text(
        "---\npolicy:\n  mode: full\n  models: [fake-small]\n---\n", encoding="utf-8"
    )
    session = session_of()
    resolved = session.resolve({})
    assert session.choices(resolved)["models"] == ["fake-small"]
    with pytest.raises(ChoiceError, match=r"policy \(.*TUTOR.md\) allows only .*fake-small"):
        session.choose(resolved, session.session_id, "fake-large", [])
    # The configured model is not allowed either: the turn is refused before any request.
    with pytest.raises(PlanError, match="allows only these models here: fake-small"):
        session.ask("What is rank?", resolved, AskOptions())
    session.close()


def test_a_choice_the_settings_no_longer_offer_is_refused_at_the_next_turn(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = session_of()
    session.choose(session.resolve({}), session.session_id, "fake-large", [])
    monkeypatch.delenv("DEEPTUTOR_MODELS")
    with pytest.raises(PlanError, match="'fake-large' is not one you can use here"):
        session.ask("What is rank?", session.resolve({}), AskOptions())
    session.close()


def test_a_chosen_knowledge_base_deleted_since_says_to_choose_again_in_the_panel(
    home: Path,
) -> None:
    import shutil

    session = session_of()
    session.choose(session.resolve({}), session.session_id, None, ["linalg"])
    shutil.rmtree(home / "kb" / "linalg")
    with pytest.raises(PlanError, match="linalg chosen for this conversation in the Tutor panel"):
        session.ask("What is rank?", session.resolve({}), AskOptions())
    session.close()


def test_on_a_hub_only_the_courses_models_are_offered(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.learning.policy import FULL
    from deeptutor_jupyter.runtime.choice import offered_models

    monkeypatch.delenv("DEEPTUTOR_BASE_URL")
    monkeypatch.delenv("DEEPTUTOR_MODEL")
    monkeypatch.setenv("DEEPTUTOR_PROVIDER", "hub")
    monkeypatch.setenv("DEEPTUTOR_HUB_SERVICE_URL", "http://127.0.0.1:9/services/deeptutor/v1")
    monkeypatch.setenv("DEEPTUTOR_HUB_TOKEN", "hub-token-of-the-student")
    monkeypatch.setenv("DEEPTUTOR_HUB_MODEL", "course-default")
    monkeypatch.setenv("DEEPTUTOR_HUB_MODELS", "course-default,course-strong")
    resolved = resolve_settings()
    # The learner's own ``models`` (fake-large, fake-small) are not the course's.
    assert offered_models(resolved, FULL) == ["course-default", "course-strong"]
