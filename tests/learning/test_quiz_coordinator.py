"""make_quiz through the QuizCoordinator and the Orchestrator: real SQLite, real audit file,
FakeLLMServer on loopback for the turn and for the separate short-answer grading request."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.agent.events import ToolCallStarted
from deeptutor_jupyter.interaction.audit import AuditLog
from deeptutor_jupyter.interaction.pending import PendingCalls
from deeptutor_jupyter.interaction.quiz import (
    InvalidQuizAnswer,
    MakeQuizTool,
    QuizClosed,
    QuizCoordinator,
    QuizExpired,
)
from deeptutor_jupyter.learning.quiz import MakeQuizArgs
from deeptutor_jupyter.learning.sandbox import Sandbox
from deeptutor_jupyter.providers import make_model
from deeptutor_jupyter.providers.base import ToolCall
from deeptutor_jupyter.runtime.context import ModelProfile, TurnContext
from deeptutor_jupyter.runtime.events import Event, EventLog
from deeptutor_jupyter.runtime.orchestrator import Orchestrator
from deeptutor_jupyter.store.db import Store
from deeptutor_jupyter.store.learning import LearningStore
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from deeptutor_jupyter.tools.base import ToolDeps

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
            "explanation": "2 times 2.",
        },
        {"id": "q2", "kind": "numeric", "prompt": "3 squared?", "answer": 9, "unit": ""},
        {"id": "q3", "kind": "short", "prompt": "What is a square?", "reference": "x times x"},
        {
            "id": "q4",
            "kind": "code",
            "prompt": "Write sq(x).",
            "starter": "def sq(x):\n    ...",
            "tests": "assert sq(3) == 9",
        },
    ],
}
PRIVATE = "my-private-answer-text"


@pytest.fixture
def learning(tmp_path: Path) -> Iterator[LearningStore]:
    store = LearningStore(tmp_path / "state.db")
    yield store
    store.close()


@pytest.fixture
def coordinator(learning: LearningStore, tmp_path: Path) -> Iterator[QuizCoordinator]:
    """Quizzes as a kind of the process's deferred calls, over the one pending table."""
    store = Store(tmp_path / "state.db")
    audit = AuditLog(tmp_path / "audit" / "quizzes.jsonl")
    yield QuizCoordinator(learning, PendingCalls(store), audit, sandbox=Sandbox(mode="unsafe"))
    store.close()


def audit_lines(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "audit" / "quizzes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


async def start(coordinator: QuizCoordinator, grader: Any = None) -> tuple[Any, list[Any]]:
    emitted: list[Any] = []
    task = asyncio.create_task(
        coordinator.ask(
            session_id="s-1",
            turn_id="t-1",
            call=ToolCall("call_quiz_1", "make_quiz", json.dumps(QUIZ)),
            args=MakeQuizArgs.model_validate(QUIZ),
            emit=lambda e: emitted.append(
                (e.type, e.model_dump(exclude_unset=True, exclude={"type"}))
            ),
            grader=grader,
        )
    )
    while not emitted and not task.done():
        await asyncio.sleep(0.01)
    if task.done():
        task.result()  # raises what went wrong
    return task, emitted


async def right_grader(messages: list[dict[str, Any]]) -> str:
    return '{"score": 1, "feedback": "Yes."}'


RIGHT = {"q1": ["b"], "q2": "9", "q3": PRIVATE, "q4": "def sq(x):\n    return x * x\n"}


async def test_the_form_event_carries_no_answers(coordinator, learning):
    task, emitted = await start(coordinator)
    kind, body = emitted[0]
    assert kind == "quiz_required" and body["tool_call_id"] == "call_quiz_1"
    text = json.dumps(body)
    for secret in ('"answer"', "x times x", "assert sq", "2 times 2"):
        assert secret not in text
    stored = learning.get_quiz(body["id"])
    assert stored is not None and stored.status == "pending"
    assert stored.spec["quiz"]["questions"][0]["answer"] == ["b"]  # kept in the kernel's store
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert learning.get_quiz(body["id"]).status == "cancelled"


async def test_submission_is_graded_and_becomes_the_tool_result(coordinator, learning, tmp_path):
    task, emitted = await start(coordinator, right_grader)
    quiz_id = emitted[0][1]["id"]
    result = await coordinator.submit("s-1", quiz_id, RIGHT, seconds=20)
    tool_result = await task
    assert json.loads(tool_result.content) == result.wire()
    assert result.score == 1.0 and all(r.correct for r in result.results)
    assert result.results[2].graded_by == "graded by the tutor"
    assert emitted[-1][0] == "quiz_resolved" and emitted[-1][1]["tool_call_id"] == "call_quiz_1"
    # Mastery evidence for the objective, and one FSRS card per question, all reviewed once.
    assert [row[0] for row in learning.evidence()] == ["squares"] * 4
    cards = learning.cards()
    assert len(cards) == 4 and all(c.card["last_review"] for c in cards)
    # Audit: ids, outcome and option ids only; never the free text or the code.
    lines = audit_lines(tmp_path)
    assert [line["event"] for line in lines] == ["asked", "answered"]
    raw = (tmp_path / "audit" / "quizzes.jsonl").read_text()
    assert PRIVATE not in raw and "return x * x" not in raw
    assert lines[1]["selections"] == ["q1:b"]


async def test_a_quiz_is_consumed_once(coordinator):
    task, emitted = await start(coordinator, right_grader)
    quiz_id = emitted[0][1]["id"]
    await coordinator.submit("s-1", quiz_id, RIGHT)
    with pytest.raises(QuizClosed):
        await coordinator.submit("s-1", quiz_id, RIGHT)
    await task


async def test_an_unreadable_answer_is_refused_and_loses_nothing(coordinator, learning):
    task, emitted = await start(coordinator, right_grader)
    quiz_id = emitted[0][1]["id"]
    with pytest.raises(InvalidQuizAnswer, match="not a number"):
        await coordinator.submit("s-1", quiz_id, {**RIGHT, "q2": "nine"})
    assert learning.get_quiz(quiz_id).status == "pending"
    result = await coordinator.submit("s-1", quiz_id, {**RIGHT, "q1": ["a"]})
    assert result.results[0].correct is False and "2 times 2." in result.results[0].feedback
    await task


async def test_an_expired_quiz_ends_the_call_with_a_timeout(coordinator):
    task, emitted = await start(coordinator)
    quiz_id = emitted[0][1]["id"]
    assert coordinator.expire(quiz_id)
    tool_result = await task
    assert tool_result.stop_turn and json.loads(tool_result.content)["reason"] == "timeout"
    with pytest.raises(QuizExpired):
        await coordinator.submit("s-1", quiz_id, RIGHT)


async def test_a_review_quiz_reschedules_existing_cards(coordinator, learning):
    task, emitted = await start(coordinator, right_grader)
    await coordinator.submit("s-1", emitted[0][1]["id"], RIGHT)
    await task
    card = learning.cards()[0]
    question = {**card.question, "id": "r1"}
    args = MakeQuizArgs.model_validate({"title": "Review", "questions": [question]})
    row = coordinator.open_quiz(
        "s-1",
        "review-1",
        "",
        "review",
        args,
        extra={"cards": {"r1": card.card_id}, "objectives": {"r1": card.objective}},
    )
    await coordinator.submit("s-1", row.quiz_id, {"r1": ["a"]})  # wrong this time
    assert learning.review_count(card.card_id) == 2
    assert len(learning.cards()) == 4  # no new card for a review
    assert learning.get_card(card.card_id).due < card.due  # Again comes back sooner


def test_make_quiz_schema_is_flat_for_the_model():
    schema = json.dumps(MakeQuizTool.schema())
    assert "discriminator" not in schema and "$ref" not in schema
    assert '"choice"' in schema and '"tolerance"' in schema


# through the orchestrator ------------------------------------------------------------------
@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


async def test_orchestrator_pauses_on_make_quiz_and_sends_the_grade_for_that_call(
    server, coordinator, tmp_path
):
    server.extend(
        [
            Reply(text="A quick check.", tool_calls=[ToolCallSpec("make_quiz", QUIZ, id="call_q")]),
            Reply(text='{"score": 0.0, "feedback": "That is not it."}'),  # the grading request
            Reply(text="Well done on the others."),
        ]
    )
    store = Store(tmp_path / "state.db")
    model = make_model(provider="custom", model="fake-model", base_url=server.url)
    try:
        orch = Orchestrator(store)
        ctx = TurnContext(
            session_id="s-1",
            turn_id="turn-1",
            question="Quiz me",
            profile=ModelProfile(provider="custom", model="fake-model"),
            enabled_tools=["make_quiz"],
        )
        log = EventLog("turn-1", store)
        events: list[Event] = []
        log.subscribe(events.append)
        turn = orch.start_turn(ctx, model, log, ToolDeps(quizzes=coordinator))
        while not any(e.body.type == "quiz_required" for e in events) and not turn.task.done():
            await asyncio.sleep(0.01)
        body = next(e for e in events if e.body.type == "quiz_required").fields()
        await coordinator.submit("s-1", body["id"], {**RIGHT, "q3": "no idea"})
        await turn.task
    finally:
        await model.aclose()
        store.close()
    assert turn.answer == "Well done on the others."
    # The make_quiz call's event is saved and reaches browsers: the public view, no answers.
    (call,) = [e.body for e in events if isinstance(e.body, ToolCallStarted)]
    assert "3 squared?" in call.arguments and '"answer"' not in call.arguments
    grading = server.requests[1].body
    assert "tools" not in grading or not grading["tools"]
    assert "no idea" in grading["messages"][1]["content"]
    sent = [
        m
        for m in server.requests[2].body["messages"]
        if m.get("role") == "tool" and m.get("tool_call_id") == "call_q"
    ]
    assert len(sent) == 1
    result = json.loads(sent[0]["content"])
    assert result["score"] == 0.75
    assert [r["correct"] for r in result["results"]] == [True, True, False, True]


async def test_bad_quiz_arguments_are_an_error_the_model_reads(server, coordinator, tmp_path):
    bad = json.loads(json.dumps(QUIZ))
    bad["questions"][0]["answer"] = ["4"]  # a label, not an option id
    server.extend(
        [
            Reply(text="", tool_calls=[ToolCallSpec("make_quiz", bad, id="call_bad")]),
            Reply(text="Sorry, I will fix the quiz."),
        ]
    )
    store = Store(tmp_path / "state.db")
    model = make_model(provider="custom", model="fake-model", base_url=server.url)
    try:
        ctx = TurnContext(
            session_id="s-1",
            turn_id="turn-bad",
            question="Quiz me",
            profile=ModelProfile(provider="custom", model="fake-model"),
            enabled_tools=["make_quiz"],
        )
        turn = Orchestrator(store).start_turn(ctx, model, None, ToolDeps(quizzes=coordinator))
        await turn.task
    finally:
        await model.aclose()
        store.close()
    sent = [
        m
        for m in server.requests[1].body["messages"]
        if m.get("role") == "tool" and m.get("tool_call_id") == "call_bad"
    ]
    assert "not among the option ids" in sent[0]["content"]
    assert "answer must list option ids, not labels" in sent[0]["content"]
    assert turn.answer == "Sorry, I will fix the quiz."
    assert coordinator.calls.store.pending_for(None) == []
