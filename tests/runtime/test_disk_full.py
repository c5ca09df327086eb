"""A disk that fills up during a turn (issue 23, item 11): the turn ends as failed with a card
that says so and what was kept, and what was saved before stays. SQLite's own page limit gives
the real SQLITE_FULL error (testing/faults.py ``disk_full``); the model is FakeLLMServer."""

from __future__ import annotations

import asyncio
import errno
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from deeptutor_jupyter.agent.events import Done, ErrorEvent
from deeptutor_jupyter.providers import make_model
from deeptutor_jupyter.providers.base import ChatModel
from deeptutor_jupyter.runtime.context import ModelProfile, TurnContext
from deeptutor_jupyter.runtime.events import EventLog
from deeptutor_jupyter.runtime.orchestrator import Orchestrator
from deeptutor_jupyter.store.db import DiskFullError, Store, _store_error
from deeptutor_jupyter.testing import FakeLLMServer, Reply, faults

LETTERS = "abcdefghijklmnopqrstuvwxyz "


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "state.db")
    s.ensure_session("s-1", "lesson.ipynb")
    yield s
    s.close()


@pytest.fixture
async def model(server: FakeLLMServer) -> AsyncIterator[ChatModel]:
    made = make_model(provider="custom", model="fake-model", base_url=server.url)
    yield made
    await made.aclose()


def context(question: str, turn_id: str) -> TurnContext:
    profile = ModelProfile(provider="custom", model="fake-model")
    return TurnContext(session_id="s-1", turn_id=turn_id, question=question, profile=profile)


async def until(predicate: object, seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not predicate():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def saved_state(store: Store, turn_id: str) -> tuple[object, ...]:
    return (store.get_turn(turn_id), store.events(turn_id), store.history("s-1"))


async def test_a_disk_that_fills_mid_stream_ends_the_turn_failed_and_keeps_what_was_saved(
    server: FakeLLMServer, store: Store, model: ChatModel
) -> None:
    rnd = random.Random(5)  # random letters: a run of text is saved compressed
    chunks = ["".join(rnd.choice(LETTERS) for _ in range(600)) for _ in range(200)]
    server.extend([Reply(text="An earlier answer."), Reply(chunks=chunks, chunk_delay=0.01)])
    orch = Orchestrator(store)
    first = orch.start_turn(context("first", "turn-0"), model)
    assert first.task is not None
    await first.task
    before = saved_state(store, "turn-0")

    log = EventLog("turn-1", store, flush_every=0.05)
    turn = orch.start_turn(context("a long answer please", "turn-1"), model, log)
    await until(lambda: any(e.body.type == "content" for e in log.events[: log.saved_seq]))
    with faults.disk_full(store):
        assert turn.task is not None
        await asyncio.wait_for(turn.task, 30)

        assert turn.status == "error"
        cards = [e.body for e in log.events if isinstance(e.body, ErrorEvent)]
        assert [(c.kind, c.message) for c in cards] == [
            (
                "disk_full",
                "The disk is full, so this answer stopped here. Kept: your question and the "
                "answer as far as it had been saved when the disk filled.",
            )
        ]
        assert cards[0].hint.startswith("The rest of the answer was not saved")
        assert "is full; free some space" in cards[0].detail  # the store's own words
        done = log.events[-1].body
        assert isinstance(done, Done) and done.status == "error"
        streamed = "".join(chunks)
        assert turn.answer and streamed.startswith(turn.answer) and turn.answer != streamed
        assert not [e for e in log.events if e.body.type == "notice"]  # the card says it once

        # The row says failed (not "running" for the kernel's lifetime), and the part of the
        # answer saved before the disk filled is still there.
        row = store.get_turn("turn-1")
        assert row is not None and row.status == "error" and "full" in (row.error or "")
        kept = "".join(d["text"] for _, kind, d in store.events("turn-1") if kind == "content")
        assert kept and turn.answer.startswith(kept) and kept != turn.answer
        assert store.history("s-1") == before[2]  # the failed turn joins no history
    assert saved_state(store, "turn-0") == before
    assert not orch.running


async def test_an_end_the_full_disk_refused_is_written_by_the_next_turn(
    server: FakeLLMServer, store: Store, model: ChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.extend([Reply(text="Never kept."), Reply(text="Room again.")])
    orch = Orchestrator(store)

    def full(*_args: object) -> None:
        raise _store_error(OSError(errno.ENOSPC, "No space left on device"), store.path)

    monkeypatch.setattr(store, "record_turn_end", full)
    monkeypatch.setattr(store, "append_messages", full)
    turn = orch.start_turn(context("q", "turn-a"), model)
    assert turn.task is not None
    await turn.task
    assert turn.status == "error"
    assert store.get_turn("turn-a").status == "running"  # type: ignore[union-attr]
    assert orch.unsaved_ends == {"turn-a": ("error", turn.disk_full)}
    monkeypatch.undo()

    second = orch.start_turn(context("q2", "turn-b"), model)
    assert second.task is not None
    await second.task
    assert second.status == "done" and orch.unsaved_ends == {}
    row = store.get_turn("turn-a")
    assert row is not None and row.status == "error" and "disk holding" in (row.error or "")


def test_an_os_error_for_a_full_disk_is_a_disk_full_error(tmp_path: Path) -> None:
    for code in (errno.ENOSPC, errno.EDQUOT):
        error = _store_error(OSError(code, "No space left on device"), tmp_path / "state.db")
        assert isinstance(error, DiskFullError) and "is full; free some space" in str(error)
    assert not isinstance(_store_error(OSError(errno.EACCES, "no"), tmp_path), DiskFullError)
