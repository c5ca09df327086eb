"""Turns through Orchestrator.start_turn, against FakeLLMServer and a real SQLite store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.agent.events import Content, ToolCallFinished
from deeptutor_jupyter.providers import make_model
from deeptutor_jupyter.providers.base import ChatModel
from deeptutor_jupyter.runtime.context import ModelProfile, TurnContext
from deeptutor_jupyter.runtime.events import Event, EventLog
from deeptutor_jupyter.runtime.orchestrator import STOPPED_NOTE, Orchestrator, _hits, _streamed_text
from deeptutor_jupyter.store.db import Store
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "state.db")
    yield s
    s.close()


@pytest.fixture
async def model_for() -> AsyncIterator[Callable[..., ChatModel]]:
    made: list[ChatModel] = []

    def make(server: FakeLLMServer, **kw: Any) -> ChatModel:
        made.append(make_model(provider="custom", model="fake-model", base_url=server.url, **kw))
        return made[-1]

    yield make
    for model in made:
        await model.aclose()


def context(question: str, turn_id: str = "turn-1", **kw: object) -> TurnContext:
    profile = ModelProfile(provider="custom", model="fake-model")
    return TurnContext(session_id="s-1", turn_id=turn_id, question=question, profile=profile, **kw)  # type: ignore[arg-type]


async def run(orch: Orchestrator, ctx: TurnContext, model: ChatModel) -> tuple[object, list[Event]]:
    log = EventLog(ctx.turn_id, orch.store)
    turn = orch.start_turn(ctx, model, log)
    assert turn.task is not None
    await turn.task
    return turn, log.events


async def test_a_turn_is_persisted_with_its_events_and_history(server, store, model_for):
    server.extend(
        [
            Reply(text="Checking.", tool_calls=[ToolCallSpec("calculate", {"expression": "2+2"})]),
            Reply(text="It is 4."),
        ]
    )
    store.ensure_session("s-1", "lesson.ipynb")
    orch = Orchestrator(store)
    turn, events = await run(orch, context("What is 2+2?"), model_for(server))
    assert turn.status == "done" and turn.answer == "It is 4."
    assert repr(turn) == f"Turn({turn.turn_id!r}, status='done', answer='It is 4.')"  # short in Out
    types = [e.body.type for e in events]
    assert types[0] == "turn_started" and types[-1] == "done"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert "tool_call" in types and "tool_result" in types
    saved = store.events("turn-1")

    assert [(seq, typ) for seq, typ, _ in saved] == [(e.seq, e.body.type) for e in events]
    assert [d for _, _, d in saved] == [e.fields() for e in events]  # replay is exact
    assert store.events("turn-1", after_seq=len(events) - 1)[0][1] == "done"
    row = store.get_turn("turn-1")
    assert row is not None and row.status == "done" and row.answer == "It is 4."
    history = store.history("s-1")
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[1]["tool_calls"][0]["function"]["name"] == "calculate"
    assert history[2]["tool_call_id"] == history[1]["tool_calls"][0]["id"]


async def test_provider_failure_becomes_an_error_event_and_no_history(server, store, model_for):
    server.add(Reply(status=401, error="Incorrect API key provided"))
    orch = Orchestrator(store)
    turn, events = await run(orch, context("hi"), model_for(server, api_key="sk-bad"))
    errors = [e.fields() for e in events if e.body.type == "error"]
    assert turn.status == "error"
    assert errors and errors[0]["kind"] == "auth" and errors[0]["hint"]
    assert events[-1].body.type == "done" and events[-1].fields()["status"] == "error"
    assert store.history("s-1") == []
    row = store.get_turn("turn-1")
    assert row is not None and row.status == "error" and row.error


async def test_cancel_keeps_a_valid_history_and_ends_with_done(server, store, model_for):
    server.add(Reply(chunks=[f"w{i} " for i in range(100)], chunk_delay=0.02))
    orch = Orchestrator(store)
    log = EventLog("turn-1", store)
    turn = orch.start_turn(context("long"), model_for(server), log)
    while not any(e.body.type == "content" for e in log.events):
        await asyncio.sleep(0.01)
    turn.cancel("Stopped by the learner.")
    assert turn.task is not None
    await turn.task
    assert turn.status == "cancelled"
    assert log.events[-1].body.type == "done" and log.events[-1].fields()["status"] == "cancelled"
    assert any(
        e.body.type == "notice" and "Stopped by the learner" in e.fields()["text"]
        for e in log.events
    )
    history = store.history("s-1")
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert history[1]["content"].endswith(STOPPED_NOTE)
    assert "w0" in history[1]["content"] and "w99" not in history[1]["content"]
    assert not orch.running  # the strong reference is released


async def test_history_is_sent_to_the_model(server, store, model_for):
    server.extend([Reply(text="first answer"), Reply(text="second answer")])
    orch = Orchestrator(store)
    model = model_for(server)
    t1, _ = await run(orch, context("q1"), model)
    await run(orch, context("q2", turn_id="turn-2", history=t1.messages), model)  # type: ignore[attr-defined]
    sent = server.requests[1].body["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "q1"),
        ("assistant", "first answer"),
        ("user", "q2"),
    ]


async def test_a_turn_cancelled_before_it_started_still_ends_with_done(server, store, model_for):
    # Two %tutor lines in one cell: the second cancels the first before the loop ran it, and
    # the first view must still be told the turn is over (else it says "starting" forever).
    orch = Orchestrator(store)
    log = EventLog("turn-1", store)
    turn = orch.start_turn(context("first"), model_for(server), log)
    turn.cancel("Replaced by a newer run of this cell.")
    assert turn.task is not None
    await asyncio.wait([turn.task])
    assert turn.status == "cancelled"
    assert log.events and log.events[-1].body.type == "done"
    assert log.events[-1].fields()["status"] == "cancelled"
    assert not orch.running
    assert server.requests == []


def test_the_answer_so_far_and_the_sources_are_read_from_the_typed_events() -> None:
    # A stopped turn keeps what the learner saw (not the reading pass's notes); the sources
    # event lists the passages every tool found.
    log = EventLog("t")
    log.emit(Content(text="notes ", explore=True))
    log.emit(Content(text="The answer"))
    log.emit(ToolCallFinished(id="c", name="kb_search", content="..", data={"hits": [{"n": 1}]}))
    log.emit(ToolCallFinished(id="d", name="calculate", content="4"))
    log.emit(Content(text=" so far"))
    assert _streamed_text(log) == "The answer so far"
    assert _hits(log) == [{"n": 1}]
