"""Regenerate and delete through the one TutorSession (runtime/session_edits.py), in-process
against the fake model: what the model is sent, what the store keeps and hides, and the
refusals."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter import limits
from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.runtime.context import AttachedContext
from deeptutor_jupyter.runtime.orchestrator import Turn
from deeptutor_jupyter.runtime.plan import PlanError
from deeptutor_jupyter.runtime.session import AskOptions, TutorSession
from deeptutor_jupyter.runtime.session_edits import DELETED, EditRefused
from deeptutor_jupyter.store.db import PendingRow
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.runtime.fake_model_env import use_fake_model

ASK = {"title": "Which way?", "mode": "single", "options": [{"id": "a", "label": "A"}]}


def session_of(notebook: str = "a.ipynb") -> TutorSession:
    return TutorSession(notebook, resolve=lambda f: resolve_settings(flags=f))


async def finished(turn: Turn) -> Turn:
    assert turn.task is not None
    await asyncio.wait_for(turn.task, 20)
    return turn


async def waiting(session: TutorSession, turn: Turn) -> PendingRow:
    """The question the turn waits on, once it is saved."""
    for _ in range(400):
        rows = session.pending(session_id=turn.ctx.session_id)
        if rows:
            return rows[0]
        assert turn.task is not None and not turn.task.done()
        await asyncio.sleep(0.01)
    raise AssertionError("the turn never asked")


@pytest.fixture
async def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeLLMServer]:
    with FakeLLMServer([]) as fake:
        use_fake_model(monkeypatch, tmp_path / "home", fake.url)
        yield fake


def sent(server: FakeLLMServer, index: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = server.requests[index].body["messages"]
    return [m for m in messages if m["role"] in ("user", "assistant")]


async def close(*sessions: TutorSession) -> None:
    for session in sessions:
        for model in session.models.values():
            await model.aclose()
        session.close()


async def test_regenerate_asks_again_and_takes_the_last_answers_place(
    server: FakeLLMServer,
) -> None:
    server.extend(
        [
            Reply(text="Four."),
            Reply(text="Nine.", tool_calls=[ToolCallSpec("read_memory", {}, id="c1")]),
            Reply(text="It is nine."),
            Reply(text="Nine, again."),
            Reply(text="Next."),
        ]
    )
    a = session_of()
    try:
        resolved = a.resolve({})
        first = await finished(a.ask("2+2?", resolved, AskOptions()))
        cell = AttachedContext(id="ctx1", name="read_cell", content="CELL [3]: x = 3")
        second = await finished(a.ask("3*3?", resolved, AskOptions(context=[cell])))
        assert second.answer == "It is nine."  # a tool round, then the answer

        with pytest.raises(EditRefused) as not_last:
            a.regenerate(first.turn_id, resolved)
        assert not_last.value.code == "not_last"

        again = await finished(a.regenerate(second.turn_id, resolved))
        # The model got the same learner message (with the cell attached) after the first
        # exchange, without the old answer or its tool round.
        assert [(m["role"], m.get("content")) for m in sent(server, 3)] == [
            ("user", "2+2?"),
            ("assistant", "Four."),
            ("user", "CELL [3]: x = 3\n\n3*3?"),
        ]
        assert again.answer == "Nine, again."
        # The new turn takes the old one's place in the list; the old stays in the store.
        summaries = [(t.turn_id, t.question) for t in a.turn_summaries()]
        assert summaries == [(first.turn_id, "2+2?"), (again.turn_id, "3*3?")]
        assert a.conversations()[0].turns == 2
        old = a.replay(second.turn_id)
        assert old is not None and old[-1].body.type == "done"
        assert getattr(old[-1].body, "answer", None) == "It is nine."
        started = a.replay(again.turn_id)
        assert started is not None and started[0].body.type == "turn_started"
        assert getattr(started[0].body, "replaces", None) == second.turn_id
        # L1 keeps both traces; the new one names the one it replaces.
        assert a.memory is not None
        traces = {t.turn_id: t for t in a.memory.traces()}
        assert second.turn_id in traces
        assert getattr(traces[again.turn_id], "replaces", None) == second.turn_id

        # The next question continues from the new answer, in this process and in another
        # session of the same notebook (another kernel, or the cell after a restart).
        await finished(a.ask("Next?", resolved, AskOptions()))
        history = json.dumps(sent(server, 4))
        assert "Nine, again." in history and "It is nine." not in history
        b = session_of()
        b.open(b.resolve({}))
        assert b.history == a.history
        b.close()
    finally:
        await close(a)


async def test_regenerate_is_refused_while_a_turn_runs_or_a_question_waits(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.extend(
        [
            Reply(text="Asking.", tool_calls=[ToolCallSpec("ask_user", ASK, id="c1")]),
            Reply(text="Stopped."),
        ]
    )
    a = session_of()
    try:
        resolved = a.resolve({})
        with pytest.raises(EditRefused) as nothing:
            a.regenerate("turn-none", resolved)
        assert nothing.value.code == "nothing_to_regenerate"

        asking = a.ask("Help?", resolved, AskOptions())
        row = await waiting(a, asking)
        with pytest.raises(EditRefused) as running:
            a.regenerate(asking.turn_id, resolved)
        assert running.value.code == "regenerate_busy"
        assert "still running" in str(running.value)

        a.stop(asking.turn_id)
        await asyncio.wait_for(asyncio.wait([asking.task]), 20)  # type: ignore[list-item]
        assert a.pending(session_id=a.session_id) == []
        # A question left waiting by a kernel that is gone (no turn runs): still not settled.
        orphan = PendingRow(
            "ask_orphan", a.session_id, asking.turn_id, "c9", {"title": "?"}, "pending",
            time.time(), time.time() + 3600, None, None,
        )  # fmt: skip
        a._store.add_pending(orphan, None)  # type: ignore[union-attr]
        with pytest.raises(EditRefused) as pending:
            a.regenerate(asking.turn_id, resolved)
        assert pending.value.code == "regenerate_busy"
        assert "waits for your answer" in str(pending.value)
        assert [t.turn_id for t in a.turn_summaries()] == [asking.turn_id]  # nothing replaced
        stopped = a._store.get_pending(row.request_id)  # type: ignore[union-attr]
        assert stopped is not None and stopped.status == "cancelled"
        # A regenerate that cannot start (the question is now over the limit) changes nothing.
        a._store.resolve_pending("ask_orphan", "expired", {}, time.time())  # type: ignore[union-attr]
        monkeypatch.setattr(limits, "QUESTION_CHARS", 3)
        before = list(a.history)
        with pytest.raises(PlanError):
            a.regenerate(asking.turn_id, resolved)
        assert a.history == before
        assert a.conversations()[0].turns == 1
    finally:
        await close(a)


async def test_delete_cancels_what_waits_hides_the_conversation_and_refuses_others(
    server: FakeLLMServer,
) -> None:
    server.extend(
        [
            Reply(text="Four."),
            Reply(text="Elsewhere."),
            Reply(text="Asking.", tool_calls=[ToolCallSpec("ask_user", ASK, id="c1")]),
            Reply(text="Yes."),
        ]
    )
    a, other = session_of(), session_of("other.ipynb")
    try:
        resolved = a.resolve({})
        kept = await finished(a.ask("2+2?", resolved, AskOptions()))
        theirs = await finished(other.ask("Mine?", other.resolve({}), AskOptions()))
        asking = a.ask("Help?", resolved, AskOptions(new=True))
        row = await waiting(a, asking)
        doomed = a.session_id

        for foreign in ("nb-unknown", other.session_id):
            with pytest.raises(EditRefused) as refused:
                a.delete_conversation(foreign)
            assert refused.value.code == "unknown"
        assert other.conversations()[0].id == theirs.ctx.session_id

        assert a.delete_conversation(doomed) == kept.ctx.session_id  # shows the other one
        await asyncio.wait_for(asyncio.wait([asking.task]), 20)  # type: ignore[list-item]
        closed = a._store.get_pending(row.request_id)  # type: ignore[union-attr]
        assert closed is not None and closed.status == "cancelled"
        assert (closed.result or {}).get("reason") == DELETED
        assert [c.id for c in a.conversations()] == [kept.ctx.session_id]
        assert [t.turn_id for t in a.turn_summaries()] == [kept.turn_id]
        assert a.switch(doomed) is False and a.replay(asking.turn_id) is None
        fresh = session_of()
        fresh.open(fresh.resolve({}))
        assert fresh.session_id == kept.ctx.session_id  # a new kernel never reopens it
        fresh.close()
        # Another kernel of the notebook still on it: its next question starts a new one.
        other_kernel = session_of()
        other_kernel.open(other_kernel.resolve({}))
        other_kernel.switch(kept.ctx.session_id)
        assert a.delete_conversation(kept.ctx.session_id) == a.session_id
        late = await finished(other_kernel.ask("Still there?", resolved, AskOptions()))
        assert late.ctx.session_id not in (doomed, kept.ctx.session_id)
        assert [c.id for c in a.conversations()] == [late.ctx.session_id]
        await close(other_kernel)

        # The last one: a new, empty conversation is current.
        assert a.delete_conversation(late.ctx.session_id) not in (doomed, late.ctx.session_id)
        assert a.conversations() == [] and a.history == []
    finally:
        await close(a, other)


async def test_regenerate_is_refused_once_another_kernel_deleted_the_conversation(
    server: FakeLLMServer,
) -> None:
    server.extend([Reply(text="Four.")])
    a, b = session_of(), session_of()
    try:
        resolved = a.resolve({})
        kept = await finished(a.ask("2+2?", resolved, AskOptions()))
        b.open(b.resolve({}))
        assert b.switch(kept.ctx.session_id)
        b.delete_conversation(kept.ctx.session_id)
        with pytest.raises(EditRefused) as refused:
            a.regenerate(kept.turn_id, resolved)
        assert refused.value.code == "unknown"
        assert len(server.requests) == 1  # nothing asked
        # The old turn is not marked replaced by a turn of another conversation.
        turns = a._store.turns(kept.ctx.session_id)  # type: ignore[union-attr]
        assert [t.id for t in turns] == [kept.turn_id]
    finally:
        await close(a, b)


async def test_regenerate_waits_for_another_live_kernels_turn_not_a_dead_ones(
    server: FakeLLMServer,
) -> None:
    """A kernel of the notebook that died mid-turn left its row 'running' (marked interrupted
    only at the next start): that must not refuse regenerate until this kernel restarts."""
    from deeptutor_jupyter.interaction.owners import Owner, register

    server.extend([Reply(text="Four."), Reply(text="Again.")])
    a = session_of()
    try:
        resolved = a.resolve({})
        kept = await finished(a.ask("2+2?", resolved, AskOptions()))
        store = a._store
        assert store is not None
        other = Owner.this_process("another kernel")  # alive: this very process
        register(store, other)
        for ghost, owner in (("turn-live", other.id), ("turn-dead", "gone-host:1:dead")):
            store.record_turn_start(ghost, a.session_id, "x?", "fake", None, owner=owner)
        with store._tx() as c:  # older than the answer to regenerate, which stays the last
            c.execute("UPDATE turns SET created_at = 0 WHERE id IN ('turn-live', 'turn-dead')")
        with pytest.raises(EditRefused) as busy:
            a.regenerate(kept.turn_id, resolved)
        assert busy.value.code == "regenerate_busy"
        store.record_turn_end("turn-live", "done", "x")
        again = await finished(a.regenerate(kept.turn_id, resolved))  # the dead one is no bar
        assert again.answer == "Again."
    finally:
        await close(a)
