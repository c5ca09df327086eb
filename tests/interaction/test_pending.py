"""The one deferred-call mechanism (interaction/pending.py) that ask_user, quizzes and reviews
share: one table, one owner rule, one consume-once rule, one resume hook.

Two "processes" are two sets of connections on one real SQLite file, each with its own
``PendingCalls`` and owner id, as two kernels on one ``state.db`` are.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.agent.events import QuizRequired, QuizResolved
from deeptutor_jupyter.interaction.audit import AuditLog
from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator
from deeptutor_jupyter.interaction.owners import Owner
from deeptutor_jupyter.interaction.pending import PendingCalls
from deeptutor_jupyter.interaction.quiz import QuizClosed, QuizCoordinator
from deeptutor_jupyter.interaction.schema import AskUserArgs
from deeptutor_jupyter.learning.quiz import MakeQuizArgs
from deeptutor_jupyter.providers.base import ToolCall
from deeptutor_jupyter.store.db import OwnerRow, PendingRow, Store
from deeptutor_jupyter.store.learning import LearningStore

QUIZ: dict[str, Any] = {
    "title": "Squares",
    "objective": "squares",
    "questions": [
        {
            "id": "q1",
            "kind": "choice",
            "prompt": "2 squared?",
            "options": [{"id": "a", "label": "2"}, {"id": "b", "label": "4"}],
            "answer": ["b"],
            "explanation": "SECRET-EXPLANATION",
        },
        {"id": "q2", "kind": "short", "prompt": "What is a square?", "reference": "x times x"},
    ],
}
RIGHT = {"q1": ["b"], "q2": "x times x"}


@dataclass
class Process:
    """One kernel's view of the learner's home: its connections, owner and coordinators."""

    store: Store
    learning: LearningStore
    asks: InteractionCoordinator
    quizzes: QuizCoordinator
    orphans: list[tuple[PendingRow, dict[str, Any]]] = field(default_factory=list)

    @property
    def calls(self) -> PendingCalls:
        return self.asks.calls

    def close(self) -> None:
        self.store.close()
        self.learning.close()


def process(home: Path, label: str, *, pid: int | None = None) -> Process:
    store = Store(home / "state.db")
    learning = LearningStore(home / "state.db")
    owner = Owner(f"{socket.gethostname()}:{label}", label)
    store.register_owner(
        OwnerRow(owner.id, pid or os.getpid(), socket.gethostname(), label, time.time())
    )
    asks = InteractionCoordinator(
        store, AuditLog(home / "audit" / "interactions.jsonl"), workspace=home, owner=owner
    )
    quizzes = QuizCoordinator(learning, asks.calls, AuditLog(home / "audit" / "quizzes.jsonl"))
    found = Process(store, learning, asks, quizzes)
    asks.on_orphan = lambda row, result: found.orphans.append((row, result))
    return found


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def pair(home: Path) -> Iterator[tuple[Process, Process]]:
    a, b = process(home, "a"), process(home, "b")
    yield a, b
    a.close()
    b.close()


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


async def until(predicate: Any, timeout: float = 5.0) -> Any:
    """Wait on a condition, with a bound."""
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {predicate}")
        await asyncio.sleep(0.005)
    return found


async def ask_quiz(p: Process, grader: Any = None) -> tuple[asyncio.Task[Any], str]:
    shown: list[dict[str, Any]] = []
    task = asyncio.create_task(
        p.quizzes.ask(
            session_id="s-1",
            turn_id="t-1",
            call=ToolCall("call_q", "make_quiz", json.dumps(QUIZ)),
            args=MakeQuizArgs.model_validate(QUIZ),
            emit=lambda event: (
                shown.append(event.model_dump()) if isinstance(event, QuizRequired) else None
            ),
            snapshot={"version": 1, "saved": "turn"},
            grader=grader,
        )
    )
    await until(lambda: shown or task.done())
    if task.done():
        task.result()  # raises what went wrong
    return task, str(shown[0]["id"])


async def right(messages: list[dict[str, Any]]) -> str:
    return '{"score": 1, "feedback": "Yes."}'


async def test_every_kind_is_a_row_of_the_one_pending_table(pair):
    a, _ = pair
    task, quiz_id = await ask_quiz(a, right)
    ask = asyncio.create_task(
        a.asks.ask(
            session_id="s-1",
            turn_id="t-2",
            call=ToolCall("call_a", "ask_user", "{}"),
            args=AskUserArgs.model_validate(
                {"title": "Go on?", "mode": "single", "options": [{"id": "y", "label": "Yes"}]}
            ),
            emit=lambda _event: None,
            snapshot=None,
        )
    )
    rows = await until(lambda: len(a.store.pending_for(None)) == 2 or ask.done())
    if ask.done():
        ask.result()
    rows = a.store.pending_for(None)
    assert sorted(r.kind for r in rows) == ["ask_user", "quiz"]
    quiz_row = next(r for r in rows if r.kind == "quiz")
    # The listed payload is the public form: the correct answers stay in the learning tables.
    assert "SECRET-EXPLANATION" not in json.dumps(quiz_row.payload)
    assert '"answer"' not in json.dumps(quiz_row.payload)
    assert quiz_row.owner == a.calls.owner.id and a.store.turn_state(quiz_id) is not None
    task.cancel()
    ask.cancel()
    await asyncio.gather(task, ask, return_exceptions=True)
    assert a.store.pending_for(None) == []  # a stopped turn's pauses take no answer


async def test_a_quiz_answered_elsewhere_is_graded_there_and_continues_with_its_owner(pair):
    a, b = pair
    task, quiz_id = await ask_quiz(a, right)
    row = b.store.get_pending(quiz_id)
    assert b.calls.route(row) == "elsewhere"
    result = await b.quizzes.submit("s-1", quiz_id, RIGHT, grader=right)
    assert result.score == 1.0
    assert b.orphans == []  # B never runs A's turn
    assert not task.done()
    # A's turn sees the grade in the store (what its watcher does every quarter second).
    await until(a.calls.poll_remote)
    tool_result = await asyncio.wait_for(task, 5)
    assert json.loads(tool_result.content) == result.wire()
    assert a.store.get_pending(quiz_id).status == "answered"
    assert a.learning.get_quiz(quiz_id).status == "answered"


async def test_a_quiz_whose_owner_is_gone_is_resumed_by_the_one_that_answers(home: Path):
    a = process(home, "a", pid=dead_pid())
    b = process(home, "b")
    try:
        a.quizzes.open_quiz(
            "s-1", "t-1", "call_q", "tool", MakeQuizArgs.model_validate(QUIZ), {"version": 1}
        )
        quiz_id = a.store.pending_for(None)[0].request_id
        b.calls.can_resume = lambda r: b.store.turn_state(r.request_id) is not None
        assert b.calls.route(b.store.get_pending(quiz_id)) == "resume"
        result = await b.quizzes.submit("s-1", quiz_id, RIGHT, grader=right)
        [(row, given)] = b.orphans
        assert row.request_id == quiz_id and given == result.wire()
        assert b.calls.tool_result(row, given).data == result.wire()
        assert isinstance(b.calls.resolved_event(row, given), QuizResolved)
        # The saved turn stays until the resumed turn checkpoints again (TutorSession.resume).
        assert b.store.turn_state(quiz_id) == {"version": 1}
    finally:
        a.close()
        b.close()


async def test_two_submitters_grade_a_quiz_once(pair):
    """A slow grader holds the quiz (``grading``) while the other process submits."""
    a, b = pair
    task, quiz_id = await ask_quiz(a)
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow(messages: list[dict[str, Any]]) -> str:
        started.set()
        await release.wait()
        return '{"score": 1, "feedback": "Yes."}'

    first = asyncio.create_task(a.quizzes.submit("s-1", quiz_id, RIGHT, grader=slow))
    await started.wait()
    assert b.store.get_pending(quiz_id).status == "grading"
    with pytest.raises(QuizClosed):
        await b.quizzes.submit("s-1", quiz_id, RIGHT, grader=right)
    release.set()
    await first
    await asyncio.wait_for(task, 5)
    assert len(a.learning.evidence()) == 2  # one quiz of two questions, graded once
    with pytest.raises(QuizClosed):
        await b.quizzes.submit("s-1", quiz_id, RIGHT, grader=right)


async def test_a_failed_grading_gives_the_quiz_back(pair):
    a, b = pair
    task, quiz_id = await ask_quiz(a)

    async def broken(messages: list[dict[str, Any]]) -> str:
        raise asyncio.CancelledError  # the grading task was stopped half way

    with pytest.raises(asyncio.CancelledError):
        await b.quizzes.submit("s-1", quiz_id, RIGHT, grader=broken)
    assert a.store.get_pending(quiz_id).status == "pending"
    await a.quizzes.submit("s-1", quiz_id, RIGHT, grader=right)
    assert (await asyncio.wait_for(task, 5)).data["score"] == 1.0


async def test_an_expired_quiz_is_closed_through_its_kind(pair):
    a, b = pair
    task, quiz_id = await ask_quiz(a)
    row = b.store.get_pending(quiz_id)
    stale = PendingRow(**{**row.__dict__, "expires_at": time.time() - 1})
    assert b.asks.expire_stale([stale]) == []  # the ask coordinator expires a quiz too
    await until(a.calls.poll_remote)
    outcome = await asyncio.wait_for(task, 5)
    assert outcome.stop_turn and outcome.data["reason"] == "timeout"
    assert a.learning.get_quiz(quiz_id).status == "expired"


async def test_the_hold_decides_when_two_submitters_both_found_the_quiz_open(pair):
    """Both read the row as pending; the other process holds it before this one can: this one
    is refused and grades nothing."""
    a, b = pair
    task, quiz_id = await ask_quiz(a)
    route = b.calls.route

    def raced(row: PendingRow) -> Any:
        assert a.store.hold_pending(quiz_id)  # the other submitter got there first
        return route(row)

    b.calls.route = raced  # type: ignore[method-assign]
    with pytest.raises(QuizClosed):
        await b.quizzes.submit("s-1", quiz_id, RIGHT, grader=right)
    assert a.learning.evidence() == [] and a.store.get_pending(quiz_id).status == "grading"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_the_owner_waits_while_its_quiz_is_graded_elsewhere(pair):
    """The owner's poll delivers a final result only: not while another process grades, even
    when the row still carries the answer of a resume that crashed."""
    a, b = pair
    task, quiz_id = await ask_quiz(a)
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[dict[str, Any]]) -> str:
        started.set()
        await release.wait()
        return '{"score": 1, "feedback": "Yes."}'

    with sqlite3.connect(a.store.path) as conn:  # kept from a crashed resume
        conn.execute(
            "UPDATE pending SET result = '{\"score\": 0}' WHERE request_id = ?", (quiz_id,)
        )
    grading = asyncio.create_task(b.quizzes.submit("s-1", quiz_id, RIGHT, grader=slow))
    await started.wait()
    assert a.calls.poll_remote() == 0 and not task.done()
    release.set()
    result = await grading
    await until(a.calls.poll_remote)
    assert (await asyncio.wait_for(task, 5)).data == result.wire()
