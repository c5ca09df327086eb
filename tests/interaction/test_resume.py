"""Exact resume without a kernel: a turn paused on ask_user continues from its saved state.

Phase one runs ``Orchestrator.start_turn`` until ``user_input_required`` and then loses its task
(the process that asked is gone). Phase two is a fresh Orchestrator and coordinator over the same
SQLite file: ``resume_turn`` with the saved state must send the model the original assistant
message and the tool message for the original tool call id, and finish the turn in the same
event log.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.interaction.audit import AuditLog
from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator, tool_result_of
from deeptutor_jupyter.interaction.schema import AskUserResult
from deeptutor_jupyter.providers import make_model
from deeptutor_jupyter.providers.base import ChatModel
from deeptutor_jupyter.runtime.context import ModelProfile, TurnContext
from deeptutor_jupyter.runtime.events import EventLog
from deeptutor_jupyter.runtime.orchestrator import STATE_VERSION, Orchestrator
from deeptutor_jupyter.runtime.saved_turn import read_saved
from deeptutor_jupyter.store.db import Store
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec

SESSION = "nb-resume"
TURN = "turn-resume-1"
QUESTION = "Help me with my project"
ASK_ARGS = {
    "title": "How should we proceed?",
    "mode": "single",
    "options": [{"id": "safe", "label": "Analyse first"}, {"id": "implement", "label": "Do it"}],
}
ANSWER = {"selections": ["safe"], "customInput": "", "cancelled": False}


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "home" / "state.db"


@pytest.fixture
async def models(server: FakeLLMServer) -> AsyncIterator[list[ChatModel]]:
    made: list[ChatModel] = []
    yield made
    for model in made:
        await model.aclose()


def new_model(server: FakeLLMServer, made: list[ChatModel]) -> ChatModel:
    made.append(make_model(provider="custom", model="fake-model", base_url=server.url))
    return made[-1]


def process(db: Path, tmp_path: Path) -> tuple[Store, Orchestrator]:
    """What one kernel holds: its own Store connection, coordinator and orchestrator."""
    store = Store(db)
    coordinator = InteractionCoordinator(
        store, AuditLog(db.parent / "audit" / "interactions.jsonl"), workspace=tmp_path
    )
    return store, Orchestrator(store, coordinator=coordinator)


async def ask_then_die(
    server: FakeLLMServer, made: list[ChatModel], db: Path, tmp_path: Path
) -> tuple[str, dict[str, Any]]:
    """Phase one: run until the question is asked, take the saved state, lose the task."""
    store, orch = process(db, tmp_path)
    store.ensure_session(SESSION, "lesson.ipynb")
    ctx = TurnContext(
        session_id=SESSION,
        turn_id=TURN,
        question=QUESTION,
        profile=ModelProfile(provider="custom", model="fake-model"),
    )
    log = EventLog(TURN, store)
    turn = orch.start_turn(ctx, new_model(server, made), log)
    for _ in range(1000):
        if any(e.body.type == "user_input_required" for e in log.events):
            break
        await asyncio.sleep(0.005)
    else:
        raise AssertionError([e.body.type for e in log.events])
    request_id = next(e.fields()["id"] for e in log.events if e.body.type == "user_input_required")
    saved = store.turn_state(request_id)
    assert saved is not None and saved["version"] == STATE_VERSION
    assert saved["loop"]["current_call"]["id"] == "call_ask_1"
    assert turn.task is not None
    turn.task.cancel()  # the process that asked is gone
    await turn.task
    store.close()
    return request_id, saved


async def resume(
    server: FakeLLMServer, made: list[ChatModel], db: Path, tmp_path: Path, saved: dict[str, Any]
) -> tuple[Store, Any]:
    """Phase two: a fresh process over the same file continues the saved turn."""
    store, orch = process(db, tmp_path)
    # A fresh log, as a surface builds it: resume_turn itself continues the saved seq.
    log = EventLog(TURN, store)
    snapshot = read_saved(saved)  # read back typed, as TutorSession.resume does
    assert snapshot is not None and snapshot.waiting_on == "call_ask_1"
    answer = tool_result_of(AskUserResult.model_validate(ANSWER))
    turn = orch.resume_turn(snapshot, answer, new_model(server, made), log)
    assert turn.task is not None
    await asyncio.wait_for(turn.task, 20)
    return store, turn


def assert_valid_history(messages: list[dict[str, Any]]) -> None:
    """Every assistant tool call is answered by its tool message before the next assistant turn."""
    for i, m in enumerate(messages):
        if m.get("role") != "assistant" or not m.get("tool_calls"):
            continue
        wanted = [c["id"] for c in m["tool_calls"]]
        following = []
        for later in messages[i + 1 :]:
            if later.get("role") != "tool":
                break
            following.append(later["tool_call_id"])
        assert following == wanted, (wanted, following)
    ids = [m["tool_call_id"] for m in messages if m.get("role") == "tool"]
    calls = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    assert sorted(ids) == sorted(calls)


def tool_messages(messages: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("role") == "tool" and m.get("tool_call_id") == call_id]


async def test_a_saved_turn_resumes_exactly_in_a_fresh_process(
    server: FakeLLMServer, models: list[ChatModel], db: Path, tmp_path: Path
) -> None:
    server.extend(
        [
            Reply(
                text="One question first.",
                tool_calls=[ToolCallSpec("ask_user", ASK_ARGS, id="call_ask_1")],
            ),
            Reply(text="Good: we analyse first."),
        ]
    )
    request_id, saved = await ask_then_die(server, models, db, tmp_path)
    assert len(server.requests) == 1
    store, turn = await resume(server, models, db, tmp_path, saved)
    try:
        assert turn.status == "done" and turn.answer == "Good: we analyse first."
        requests = server.requests
        assert len(requests) == 2
        first, second = requests[0].body["messages"], requests[1].body["messages"]
        # The same conversation, continued: what the model saw, its own call, then the result.
        assert second[: len(first)] == first
        assistant, tool = second[len(first)], second[len(first) + 1]
        assert assistant["role"] == "assistant"
        assert assistant["content"] == "One question first."
        assert [c["id"] for c in assistant["tool_calls"]] == ["call_ask_1"]
        assert assistant["tool_calls"][0]["function"]["name"] == "ask_user"
        assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == ASK_ARGS
        assert tool["role"] == "tool" and tool["tool_call_id"] == "call_ask_1"
        assert json.loads(tool["content"]) == ANSWER
        assert len(second) == len(first) + 2
        assert requests[1].body.get("tools") == requests[0].body.get("tools")

        # One turn, one event log: seqs run on without a gap or a repeat.
        events = store.events(TURN)
        seqs = [seq for seq, _, _ in events]
        assert seqs == list(range(1, len(seqs) + 1))
        types = [typ for _, typ, _ in events]
        assert types.count("turn_started") == 2
        resumed_start = [d for _, t, d in events if t == "turn_started"][1]
        assert resumed_start["resumed"] is True
        assert types[-1] == "done" and events[-1][2]["status"] == "done"
        result = [d for _, t, d in events if t == "tool_result" and d["id"] == "call_ask_1"]
        assert json.loads(result[-1]["content"]) == ANSWER

        # The stored conversation is one a provider accepts.
        history = store.history(SESSION)
        assert_valid_history(history)
        assert tool_messages(history, "call_ask_1")[-1]["content"] == json.dumps(ANSWER)
        assert history[-1] == {"role": "assistant", "content": "Good: we analyse first."}
        row = store.get_turn(TURN)
        assert row is not None and row.status == "done"
        assert row.answer == "Good: we analyse first."
        assert store.get_pending(request_id) is not None
    finally:
        store.close()


async def test_the_other_calls_of_the_round_still_run_after_resume(
    server: FakeLLMServer, models: list[ChatModel], db: Path, tmp_path: Path
) -> None:
    server.extend(
        [
            Reply(
                text="Let me ask and compute.",
                tool_calls=[
                    ToolCallSpec("ask_user", ASK_ARGS, id="call_ask_1"),
                    ToolCallSpec("calculate", {"expression": "6*7"}, id="call_calc_2"),
                ],
            ),
            Reply(text="Analyse first, and 6*7 is 42."),
        ]
    )
    _, saved = await ask_then_die(server, models, db, tmp_path)
    assert [c["id"] for c in saved["loop"]["pending_calls"]] == ["call_calc_2"]
    store, turn = await resume(server, models, db, tmp_path, saved)
    try:
        assert turn.status == "done" and turn.answer == "Analyse first, and 6*7 is 42."
        second = server.requests[1].body["messages"]
        assistant = next(m for m in second if m.get("tool_calls"))
        assert [c["id"] for c in assistant["tool_calls"]] == ["call_ask_1", "call_calc_2"]
        tail = second[second.index(assistant) + 1 :]
        assert [m["tool_call_id"] for m in tail] == ["call_ask_1", "call_calc_2"]
        assert json.loads(tail[0]["content"]) == ANSWER
        assert "42" in tail[1]["content"]
        assert_valid_history(second)
        events = store.events(TURN)
        assert [s for s, _, _ in events] == list(range(1, len(events) + 1))
        calc = [d for _, t, d in events if t == "tool_result" and d["id"] == "call_calc_2"]
        assert len(calc) == 1 and not calc[0]["is_error"]
        assert_valid_history(store.history(SESSION))
    finally:
        store.close()
