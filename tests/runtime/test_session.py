"""TutorSession: one conversation's turns run one after another, so a follow-up asked before
the previous answer ended still reads it (and two answers never interleave)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.runtime.orchestrator import WAITING_FOR_PREVIOUS
from deeptutor_jupyter.runtime.session import AskOptions, TutorSession
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.runtime.fake_model_env import use_fake_model


async def test_a_follow_up_waits_for_the_previous_answer_and_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replies = [Reply(chunks=["An eigen", "vector."], chunk_delay=0.2), Reply(text="Seven.")]
    with FakeLLMServer(replies) as server:
        use_fake_model(monkeypatch, tmp_path / "home", server.url)
        session = TutorSession("lesson.ipynb", resolve=lambda f: resolve_settings(flags=f))
        resolved = session.resolve({})
        first = session.ask("What is an eigenvector?", resolved, AskOptions())
        second = session.ask("And 2*3+1?", resolved, AskOptions())
        assert first.task is not None and second.task is not None
        await asyncio.wait_for(asyncio.gather(first.task, second.task), 20)
        for model in session.models.values():
            await model.aclose()
    assert first.answer == "An eigenvector." and second.answer == "Seven."
    later = server.requests[1].body["messages"]
    assert [m["content"] for m in later if m["role"] != "system"] == [
        "What is an eigenvector?",
        "An eigenvector.",
        "And 2*3+1?",
    ]
    said = session.events_of(second)  # a finished turn's events are read from the store
    assert any(e.fields().get("text") == WAITING_FOR_PREVIOUS for e in said)


async def test_the_owner_beats_while_a_turn_waits_and_stops_when_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from deeptutor_jupyter.interaction import owners
    from deeptutor_jupyter.store.db import Store
    from deeptutor_jupyter.testing import ToolCallSpec

    monkeypatch.setattr(owners, "HEARTBEAT_SECONDS", 0.02)
    ask = {"title": "Which?", "mode": "single", "options": [{"id": "a", "label": "A"}]}
    replies = [Reply(text="First.", tool_calls=[ToolCallSpec("ask_user", ask, id="c1")])]

    def beating() -> bool:
        return any(t.name == "deeptutor-heartbeat" for t in threading.enumerate())

    async def until(predicate: Callable[[], bool]) -> None:
        while not predicate():
            await asyncio.sleep(0.01)

    with FakeLLMServer(replies) as server:
        use_fake_model(monkeypatch, tmp_path / "home", server.url)
        session = TutorSession("lesson.ipynb", resolve=lambda f: resolve_settings(flags=f))
        turn = session.ask("Help me", session.resolve({}))
        assert turn.task is not None
        store = Store(tmp_path / "home" / "state.db")  # what another kernel reads
        try:
            registered = store.owners()[0].heartbeat
            # The row is beaten again while the turn waits on its question, from a thread.
            await asyncio.wait_for(until(lambda: store.owners()[0].heartbeat > registered), 10)
            assert beating()
            session.stop(turn.turn_id)
            await asyncio.wait_for(asyncio.wait([turn.task]), 10)
            await asyncio.wait_for(until(lambda: not beating()), 10)  # no turn, no beat
        finally:
            store.close()
            for model in session.models.values():
                await model.aclose()
            session.close()


async def test_wait_names_the_turns_still_running_when_its_timeout_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.runtime.session import TurnsStillRunning

    # The second reply holds its stream open until the server stops: that turn cannot finish.
    replies = [Reply(text="Done."), Reply(fault="keepalive", chunk_delay=0.05)]
    with FakeLLMServer(replies) as server:
        use_fake_model(monkeypatch, tmp_path / "home", server.url)
        session = TutorSession("lesson.ipynb", resolve=lambda f: resolve_settings(flags=f))
        resolved = session.resolve({})
        first = session.ask("Quick one", resolved, AskOptions())
        assert first.task is not None
        assert await session.wait(20) == [first]  # all finished: the turns, no error
        stuck = session.ask("Slow one", resolved, AskOptions())
        with pytest.raises(TurnsStillRunning) as caught:
            await session.wait(0.2)
        assert caught.value.running == [stuck] and caught.value.turns == [first, stuck]
        assert isinstance(caught.value, TimeoutError) and stuck.turn_id in str(caught.value)
        stuck.cancel("test over")
        assert stuck.task is not None
        await asyncio.wait_for(asyncio.wait([stuck.task]), 20)
        for model in session.models.values():
            await model.aclose()
    assert first.status == "done" and stuck.status == "cancelled"


async def test_finished_turns_hold_no_events_so_memory_stays_flat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28: the session keeps every turn (``wait_for_turns``), and each kept its whole
    event log (+31 kB of kernel RSS a turn). Once saved and seen, a finished turn lets go of
    its events: the events alive after 50 turns are those after 5, and a reader still gets
    them all from the store."""
    import gc

    from deeptutor_jupyter.runtime.events import Event

    def alive() -> tuple[int, int]:
        gc.collect()
        events = sum(1 for o in gc.get_objects() if isinstance(o, Event))
        return events, sum(len(t.log.events) for t in session.turns)

    with FakeLLMServer([Reply(chunks=["An ", "answer ", f"{i}."]) for i in range(60)]) as server:
        use_fake_model(monkeypatch, tmp_path / "home", server.url)
        session = TutorSession("lesson.ipynb", resolve=lambda f: resolve_settings(flags=f))
        resolved = session.resolve({})
        seen = {}
        for n in range(1, 51):
            turn = session.ask(f"Question {n}?", resolved, AskOptions())
            await session.wait(30)
            if n in (5, 50):
                seen[n] = alive()
        for model in session.models.values():
            await model.aclose()
    assert seen[50] == seen[5] and seen[50][1] == 0, seen
    assert turn.answer == "An answer 49." and len(session.turns) == 50  # the turns stay
    said = session.events_of(turn)
    assert said[0].body.type == "turn_started" and said[-1].body.type == "done"
    assert said[-1].seq == turn.log.last_seq
