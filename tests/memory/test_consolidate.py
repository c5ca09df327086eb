"""Consolidation against a scripted FakeLLMServer: what is sent, what is applied, what is not."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.memory import MemoryStore
from deeptutor_jupyter.memory.consolidate import (
    RunBusyError,
    consolidate,
    parse_ops_reply,
    preview,
)
from deeptutor_jupyter.providers import ChatModel
from deeptutor_jupyter.testing import FakeLLMServer, Reply

from .conftest import make_record, ops_reply


def sent_trace_ids(server: FakeLLMServer) -> list[list[str]]:
    """The trace ids of the traces in each request's user message."""
    batches = []
    for request in server.requests:
        user = request.body["messages"][-1]["content"]
        lines = user.split("New traces (one JSON object a line):\n", 1)[1].splitlines()
        batches.append([json.loads(line)["trace_id"] for line in lines])
    return batches


async def test_update_applies_valid_ops_and_rejects_invalid_ones(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    store.emit(make_record("t_1", question="What is a derivative?"))
    server.add(
        ops_reply(
            {"op": "add", "section": "Topics", "text": "Studies derivatives", "refs": ["t_1"]},
            {"op": "add", "section": "Topics", "text": "x" * 300, "refs": ["t_1"]},
            {"op": "add", "section": "Topics", "text": "Invented", "refs": ["t_999"]},
        )
    )
    result = await consolidate(store, model, layer="L2", key="chat", mode="update")
    assert [op["text"] for op in result.ops_applied] == ["Studies derivatives"]
    reasons = [reason for _, reason in result.rejected]
    assert "at most 240" in reasons[0] and "unknown reference 't_999'" in reasons[1]
    assert (result.passes, result.traces_seen) == (1, 1)
    assert "+- Studies derivatives [^1]" in result.diff
    assert store.read_text("L2", "chat").endswith("[^1]: t_1\n")
    body = server.requests[0].body
    assert (
        body["messages"][0]["role"] == "system"
        and '{"ops": [...]}' in body["messages"][0]["content"]
    )
    assert "What is a derivative?" in body["messages"][1]["content"]


async def test_update_is_incremental_and_chunked(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    for i in range(25):
        store.emit(make_record(f"t_{i:02d}", started_at=1000.0 + i))
    server.extend([ops_reply(), ops_reply()])
    first = await consolidate(store, model, layer="L3", key="profile", mode="update")
    assert first.traces_seen == 25 and first.passes == 2
    assert [len(batch) for batch in sent_trace_ids(server)] == [20, 5]

    server.clear_requests()
    store.emit(make_record("t_new", started_at=2000.0))
    server.add(ops_reply())
    second = await consolidate(store, model, layer="L3", key="profile", mode="update")
    assert sent_trace_ids(server) == [["t_new"]]
    assert second.traces_seen == 1

    server.clear_requests()
    third = await consolidate(store, model, layer="L3", key="profile", mode="update")
    assert server.requests == [] and third.passes == 0


async def test_a_replaced_answer_is_not_offered_again(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    """A regenerated turn's trace names the turn it replaces (runtime/session_edits.py): the
    old trace stays in L1 and citable, but consolidation and its preview skip it."""
    store.emit(make_record("t_old", turn_id="turn-old"))
    store.emit(make_record("t_new", turn_id="turn-new", replaces="turn-old"))
    server.extend([ops_reply(), ops_reply()])
    shown = await preview(store, model, layer="L2", key="chat", mode="update")
    assert shown.unseen == ["t_new"]
    await consolidate(store, model, layer="L2", key="chat", mode="update")
    assert sent_trace_ids(server) == [["t_new"], ["t_new"]]
    assert "t_old" in store.known_trace_ids()


async def test_update_on_l2_reads_only_its_surface(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    store.emit(make_record("t_chat"))
    store.emit(make_record("t_quiz", surface="quiz"))
    server.add(ops_reply())
    await consolidate(store, model, layer="L2", key="quiz", mode="update")
    assert sent_trace_ids(server) == [["t_quiz"]]


async def test_an_unreadable_reply_leaves_the_traces_unseen(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    store.emit(make_record("t_1"))
    server.extend([Reply(text="Sure! I will remember that."), ops_reply()])
    result = await consolidate(store, model, layer="L2", key="chat", mode="update")
    assert result.traces_seen == 0 and 'not JSON {"ops"' in result.rejected[0][1]
    assert store.read_text("L2", "chat") == ""
    again = await consolidate(store, model, layer="L2", key="chat", mode="update")
    assert again.traces_seen == 1


async def test_preview_writes_nothing_and_marks_nothing(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    store.emit(make_record("t_1"))
    add = {"op": "add", "section": "S", "text": "Likes examples", "refs": ["t_1"]}
    server.extend([ops_reply(add), ops_reply(add)])
    preview = await consolidate(store, model, layer="L2", key="chat", mode="update", apply=False)
    assert "+- Likes examples" in preview.diff
    assert store.read_text("L2", "chat") == "" and store.seen_traces("L2", "chat") == set()
    applied = await consolidate(store, model, layer="L2", key="chat", mode="update")
    assert [op["text"] for op in applied.ops_applied] == ["Likes examples"]


async def test_audit_sends_entries_with_their_evidence(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    store.emit(make_record("t_1", answer_summary="Solved 3 of 3 fraction exercises"))
    store.overwrite(
        "L3",
        "profile",
        "## Level\n- Struggles with fractions [^1] <!--m_a-->\n- Likes puzzles <!--m_b-->\n"
        "\n[^1]: t_1\n",
    )
    server.add(
        ops_reply(
            {"op": "edit", "id": "m_a", "text": "Handles fractions well", "refs": ["t_1"]},
            {"op": "delete", "id": "m_b", "reason": "low-signal"},
            {"op": "edit", "id": "m_b", "text": "gone already", "refs": ["t_1"]},
        )
    )
    result = await consolidate(store, model, layer="L3", key="profile", mode="audit")
    user = server.requests[0].body["messages"][1]["content"]
    assert "[m_a] (Level) Struggles with fractions  refs: t_1" in user
    assert "Solved 3 of 3 fraction exercises" in user
    assert len(result.ops_applied) == 2 and "no entry with id 'm_b'" in result.rejected[0][1]
    assert [e.text for _, e in store.read("L3", "profile").entries()] == ["Handles fractions well"]
    deletions = (store.root / "deletions.jsonl").read_text()
    assert '"reason": "low-signal"' in deletions


async def test_dedup_stops_when_a_pass_changes_nothing(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    store.emit(make_record("t_1"))
    store.emit(make_record("t_2"))
    store.overwrite(
        "L3",
        "scope",
        "## Courses\n- Takes Calculus I [^1] <!--m_a-->\n- Enrolled in Calc 1 [^2] <!--m_b-->\n"
        "\n[^1]: t_1\n[^2]: t_2\n",
    )
    server.extend(
        [
            ops_reply(
                {"op": "edit", "id": "m_a", "text": "Takes Calculus I", "refs": ["t_1", "t_2"]},
                {"op": "delete", "id": "m_b", "reason": "superseded"},
            ),
            ops_reply(),
        ]
    )
    result = await consolidate(store, model, layer="L3", key="scope", mode="dedup")
    assert result.passes == 2 and server.pending == 0
    assert store.read_text("L3", "scope") == (
        "## Courses\n- Takes Calculus I [^1][^2] <!--m_a-->\n\n---\n\n[^1]: t_1\n[^2]: t_2\n"
    )


async def test_dedup_runs_at_most_three_passes(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    store.emit(make_record("t_1"))
    for i in range(4):
        text = f"Fact {i}"
        server.add(ops_reply({"op": "add", "section": "S", "text": text, "refs": ["t_1"]}))
    result = await consolidate(store, model, layer="L2", key="chat", mode="dedup")
    assert result.passes == 3 and server.pending == 1


async def test_merge_needs_no_model_and_collapses_duplicates(store: MemoryStore) -> None:
    path = store.path("L2", "notebook")
    path.parent.mkdir(parents=True)
    path.write_text(
        "## S\n- Uses numpy [^m_a]\n- uses NumPy. [^m_b]\n- Other [^m_c]\n\n"
        "[^m_a]: t_1\n[^m_b]: t_2, t_1\n[^m_c]: t_2\n"
    )
    result = await consolidate(store, None, layer="L2", key="notebook", mode="merge")
    assert result.passes == 1
    assert path.read_text() == (
        "## S\n- Uses numpy [^1][^2] <!--m_a-->\n- Other [^2] <!--m_c-->\n\n---\n\n"
        "[^1]: t_1\n[^2]: t_2\n"
    )
    assert json.loads((store.root / "deletions.jsonl").read_text())["reason"] == "superseded"


async def test_preferences_are_never_consolidated(store: MemoryStore) -> None:
    with pytest.raises(ValueError, match="not auto-consolidated"):
        await consolidate(store, None, layer="L3", key="preferences", mode="merge")


def _hold_run_lock(home: str, ready: Any, release: Any) -> None:
    with MemoryStore(Path(home)).run_lock("L3", "profile"):
        ready.set()
        release.wait(30)


async def test_a_second_run_on_the_same_document_is_busy(store: MemoryStore) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_run_lock, args=(str(store.home), ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(RunBusyError, match="already running"):
            await consolidate(store, None, layer="L3", key="profile", mode="merge")
        # Another document is not blocked.
        await consolidate(store, None, layer="L3", key="scope", mode="merge")
    finally:
        release.set()
        holder.join(30)
    result = await consolidate(store, None, layer="L3", key="profile", mode="merge")
    assert result.passes == 1


@pytest.mark.parametrize(
    ("reply", "ops"),
    [
        ('{"ops": []}', []),
        ('```json\n{"ops": [{"op": "add"}]}\n```', [{"op": "add"}]),
        ('<think>{"ops": "no"}</think>Here: {"ops": []}', []),
        ('{"ops": {"op": "add"}}', None),
        ("no json here", None),
    ],
)
def test_parse_ops_reply(reply: str, ops: list[Any] | None) -> None:
    assert parse_ops_reply(reply) == ops
