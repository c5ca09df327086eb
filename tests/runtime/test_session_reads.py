"""What a sealed TutorSession lets surfaces read: only its own notebook's conversations."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.runtime.session import AskOptions, TutorSession
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.runtime.fake_model_env import use_fake_model


async def test_a_session_reads_its_own_notebook_and_nothing_of_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeLLMServer([Reply(text="Four."), Reply(text="Nine.")]) as server:
        use_fake_model(monkeypatch, tmp_path / "home", server.url)
        a = TutorSession("a.ipynb", resolve=lambda f: resolve_settings(flags=f))
        b = TutorSession("b.ipynb", resolve=lambda f: resolve_settings(flags=f))
        assert not a.is_open and a.conversations() == [] and a.replay("turn-x") is None
        resolved = a.resolve({})
        in_a = a.ask("2+2?", resolved, AskOptions())
        in_b = b.ask("3*3?", b.resolve({}), AskOptions())
        assert in_a.task is not None and in_b.task is not None
        await asyncio.wait_for(asyncio.gather(in_a.task, in_b.task), 20)
        for session in (a, b):
            for model in session.models.values():
                await model.aclose()
    try:
        [conversation] = a.conversations()
        assert (conversation.id, conversation.title, conversation.turns) == (
            a.session_id,
            "2+2?",
            1,
        )
        [summary] = a.turn_summaries()
        assert (summary.turn_id, summary.status) == (in_a.turn_id, "done")
        replayed = a.replay(in_a.turn_id)
        assert replayed is not None and replayed[-1].body.type == "done"
        assert summary.last_seq == replayed[-1].seq
        assert [e.seq for e in a.replay(in_a.turn_id, after_seq=2) or []] == [
            e.seq for e in replayed if e.seq > 2
        ]
        # b's turn and conversation are not a's to read, switch to or rename.
        assert a.replay(in_b.turn_id) is None
        assert a.switch(b.session_id) is False and a.rename(b.session_id, "mine") is False
        assert a.notebook_sessions() == [a.session_id]
        # a's own: renamed, and switched back to after a new conversation.
        assert a.rename(a.session_id, "Arithmetic") is True
        assert a.conversations()[0].title == "Arithmetic"
        first = a.session_id
        a.new_conversation()
        assert a.switch(first) is True and a.session_id == first
        assert [m["role"] for m in a.history] == ["user", "assistant"]
        assert a.pending(session_id=first) == []
    finally:
        a.close()
        b.close()


async def test_a_composed_question_shows_and_names_the_conversation_in_the_learners_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`%tutor why` sends the traceback, `--cell 3` the cell's code: the panel's bubble and the
    conversation's name are what the learner asked; the model and the store keep the rest."""
    sent = "I got this error in my notebook.\n\n```\nZeroDivisionError\n```"
    with FakeLLMServer([Reply(text="Divide by something else.")]) as server:
        use_fake_model(monkeypatch, tmp_path / "home", server.url)
        a = TutorSession("a.ipynb", resolve=lambda f: resolve_settings(flags=f))
        turn = a.ask(sent, a.resolve({}), AskOptions(shown="Explain my last error."))
        assert turn.task is not None
        await asyncio.wait_for(turn.task, 20)
        for model in a.models.values():
            await model.aclose()
        asked = server.requests[0].body["messages"][-1]["content"]
    try:
        assert "ZeroDivisionError" in asked
        assert a.conversations()[0].title == "Explain my last error."
        assert a.turn_summaries()[0].question == "Explain my last error."
        started = (a.replay(turn.turn_id) or [])[0].body
        assert "ZeroDivisionError" in getattr(started, "question", "")  # the trace keeps it
    finally:
        a.close()
