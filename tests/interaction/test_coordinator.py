"""InteractionCoordinator against a real SQLite store and audit file: ask, submit, refuse, expire.

No model is involved: ``ask`` is called the way the orchestrator calls it, and ``submit`` the way
a card, ``submit_user_input`` or a second kernel would.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.interaction.audit import AuditLog
from deeptutor_jupyter.interaction.coordinator import (
    AlreadyAnswered,
    ExpiredRequest,
    ForeignSession,
    InteractionCoordinator,
    InteractionError,
    InvalidAnswer,
    NotResumable,
    UnknownRequest,
    check_answer,
)
from deeptutor_jupyter.interaction.schema import AskUserArgs, AskUserResult
from deeptutor_jupyter.providers.base import ToolCall
from deeptutor_jupyter.store.db import PendingRow, Store
from deeptutor_jupyter.tools.base import ToolResult

REPO = Path(__file__).resolve().parents[2]
SESSION = "nb-lesson-1"
OPTIONS = [
    {"id": "safe", "label": "Analyse first", "description": "Read and plan", "recommended": True},
    {"id": "implement", "label": "Just do it"},
]


# fixtures and helpers --------------------------------------------------------------------------
@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "state.db")
    yield s
    s.close()


@pytest.fixture
def audit_path(tmp_path: Path) -> Path:
    return tmp_path / "audit" / "interactions.jsonl"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "data" / "raw").mkdir(parents=True)
    return ws


@pytest.fixture
def coordinator(store: Store, audit_path: Path, workspace: Path) -> InteractionCoordinator:
    return InteractionCoordinator(store, AuditLog(audit_path), workspace=workspace)


def audit_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def args_of(mode: str = "single", **extra: Any) -> AskUserArgs:
    data: dict[str, Any] = {"title": "How should we proceed?", "mode": mode, **extra}
    if mode in ("single", "multiple", "toggle"):
        data.setdefault("options", OPTIONS)
    return AskUserArgs.model_validate(data)


class Asked:
    """A running ``ask`` and everything it emitted."""

    def __init__(self, task: asyncio.Task[ToolResult], emitted: list[tuple[str, dict[str, Any]]]):
        self.task = task
        self.emitted = emitted

    @property
    def body(self) -> dict[str, Any]:
        return next(d for t, d in self.emitted if t == "user_input_required")

    @property
    def request_id(self) -> str:
        return str(self.body["id"])


async def start_ask(
    coordinator: InteractionCoordinator,
    mode: str = "single",
    *,
    call_id: str = "call_ask_1",
    snapshot: dict[str, Any] | None = None,
    **extra: Any,
) -> Asked:
    emitted: list[tuple[str, dict[str, Any]]] = []

    def emit(event: Any) -> None:
        emitted.append((event.type, event.model_dump(exclude_unset=True, exclude={"type"})))

    task = asyncio.get_running_loop().create_task(
        coordinator.ask(
            session_id=SESSION,
            turn_id="turn-1",
            call=ToolCall(call_id, "ask_user", "{}"),
            args=args_of(mode, **extra),
            emit=emit,
            snapshot=snapshot if snapshot is not None else {"loop": {"marker": call_id}},
        )
    )
    for _ in range(200):
        if any(t == "user_input_required" for t, _ in emitted):
            return Asked(task, emitted)
        await asyncio.sleep(0.005)
    raise AssertionError("ask never emitted user_input_required")


async def still_waiting(asked: Asked) -> None:
    await asyncio.sleep(0.02)  # a resolution goes through call_soon_threadsafe: give it a turn
    assert not asked.task.done()


# asking -----------------------------------------------------------------------------------------
async def test_ask_persists_the_form_and_the_paused_turn_and_emits_the_reference_payload(
    coordinator: InteractionCoordinator, store: Store, audit_path: Path
) -> None:
    snapshot = {"version": 1, "loop": {"current_call": {"id": "call_ask_1"}}}
    asked = await start_ask(coordinator, allowCustom=True, submitLabel="Go", snapshot=snapshot)
    body = asked.body
    for key in (
        "id",
        "tool_call_id",
        "session_id",
        "title",
        "mode",
        "options",
        "allow_custom",
        "submit_label",
        "resumable",
    ):
        assert key in body, key
    assert body["id"].startswith("ask_") and body["tool_call_id"] == "call_ask_1"
    assert body["session_id"] == SESSION and body["title"] == "How should we proceed?"
    assert body["mode"] == "single" and body["allow_custom"] is True
    assert body["submit_label"] == "Go" and body["resumable"] is True
    assert body["options"] == [
        {
            "id": "safe",
            "label": "Analyse first",
            "description": "Read and plan",
            "recommended": True,
        },
        {"id": "implement", "label": "Just do it", "description": "", "recommended": False},
    ]
    # The minimal fields the reference frontend checks are strings.
    assert all(isinstance(body[k], str) for k in ("id", "tool_call_id", "title", "mode"))

    row = store.get_pending(asked.request_id)
    assert row is not None and row.status == "pending"
    assert row.session_id == SESSION and row.turn_id == "turn-1"
    assert row.tool_call_id == "call_ask_1" and row.payload == body
    assert row.expires_at > row.created_at and row.result is None
    assert store.turn_state(asked.request_id) == snapshot
    assert coordinator.is_live(asked.request_id)
    assert [e["event"] for e in audit_lines(audit_path)] == ["asked"]
    asked.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asked.task


async def test_the_form_and_the_turn_state_are_saved_together_or_not_at_all(
    coordinator: InteractionCoordinator, store: Store, audit_path: Path
) -> None:
    """A turn state that cannot be saved leaves no orphan question behind."""
    with pytest.raises(TypeError):
        await coordinator.ask(
            session_id=SESSION,
            turn_id="turn-1",
            call=ToolCall("call_ask_1", "ask_user", "{}"),
            args=args_of(),
            emit=lambda _e: None,
            snapshot={"not json": {1, 2}},
        )
    assert store.pending_for() == []
    assert store._query("SELECT COUNT(*) FROM turn_states") == [(0,)]
    assert audit_lines(audit_path) == []


async def test_submit_resolves_the_waiting_ask_with_the_reference_result(
    coordinator: InteractionCoordinator, store: Store, audit_path: Path
) -> None:
    asked = await start_ask(coordinator, "multiple", allowCustom=True)
    result = coordinator.submit(SESSION, asked.request_id, ["safe", "implement"], "and tests")
    expected = {"selections": ["safe", "implement"], "customInput": "and tests", "cancelled": False}
    assert result.wire() == expected
    tool = await asyncio.wait_for(asked.task, 5)
    assert json.loads(tool.content) == expected and tool.data == expected
    assert not tool.is_error and not tool.stop_turn
    assert "safe, implement" in tool.summary
    row = store.get_pending(asked.request_id)
    assert row is not None and row.status == "answered" and row.result == expected
    assert row.answered_at is not None
    resolved = [d for t, d in asked.emitted if t == "user_input_resolved"]
    # The event's names are snake_case; the tool result keeps the reference's (the model's).
    assert resolved == [
        {
            "id": asked.request_id,
            "tool_call_id": "call_ask_1",
            "selections": ["safe", "implement"],
            "custom_input": "and tests",
            "cancelled": False,
        }
    ]
    assert not coordinator.is_live(asked.request_id)
    lines = audit_lines(audit_path)
    assert [e["event"] for e in lines] == ["asked", "answered"]
    assert lines[1]["selections"] == ["safe", "implement"]
    assert lines[1]["tool_call_id"] == "call_ask_1" and lines[1]["session_id"] == SESSION


async def test_cancel_becomes_a_cancelled_result_that_stops_the_turn(
    coordinator: InteractionCoordinator, store: Store, audit_path: Path
) -> None:
    asked = await start_ask(coordinator)
    # What was typed before cancelling is dropped.
    coordinator.submit(SESSION, asked.request_id, ["safe"], "", cancelled=True)
    tool = await asyncio.wait_for(asked.task, 5)
    assert json.loads(tool.content) == {"selections": [], "customInput": "", "cancelled": True}
    assert tool.stop_turn and tool.summary == "cancelled"
    row = store.get_pending(asked.request_id)
    assert row is not None and row.status == "cancelled"
    assert audit_lines(audit_path)[-1]["event"] == "cancelled"


# refusals ---------------------------------------------------------------------------------------
def assert_rejected(audit_path: Path, code: str) -> None:
    last = audit_lines(audit_path)[-1]
    assert last["event"] == "rejected" and last["reason"] == code, last


async def test_unknown_request_is_refused(
    coordinator: InteractionCoordinator, store: Store, audit_path: Path
) -> None:
    asked = await start_ask(coordinator)
    with pytest.raises(UnknownRequest) as info:
        coordinator.submit(SESSION, "ask_does_not_exist", ["safe"])
    assert info.value.code == "unknown"
    assert_rejected(audit_path, "unknown")
    row = store.get_pending(asked.request_id)
    assert row is not None and row.status == "pending"
    await still_waiting(asked)
    asked.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asked.task


async def test_foreign_session_is_refused_and_the_question_stays_answerable(
    coordinator: InteractionCoordinator, store: Store, audit_path: Path
) -> None:
    asked = await start_ask(coordinator)
    with pytest.raises(ForeignSession) as info:
        coordinator.submit("nb-someone-else", asked.request_id, ["safe"])
    assert info.value.code == "foreign_session"
    assert_rejected(audit_path, "foreign_session")
    row = store.get_pending(asked.request_id)
    assert row is not None and row.status == "pending" and row.result is None
    await still_waiting(asked)
    coordinator.submit(SESSION, asked.request_id, ["implement"])
    tool = await asyncio.wait_for(asked.task, 5)
    assert json.loads(tool.content)["selections"] == ["implement"]


async def test_duplicate_is_refused_and_the_first_answer_stands(
    coordinator: InteractionCoordinator, store: Store, audit_path: Path
) -> None:
    asked = await start_ask(coordinator)
    coordinator.submit(SESSION, asked.request_id, ["safe"])
    await asyncio.wait_for(asked.task, 5)
    before = store.get_pending(asked.request_id)
    with pytest.raises(AlreadyAnswered) as info:
        coordinator.submit(SESSION, asked.request_id, ["implement"])
    assert info.value.code == "duplicate"
    assert_rejected(audit_path, "duplicate")
    assert store.get_pending(asked.request_id) == before
    assert before is not None and before.result is not None
    assert before.result["selections"] == ["safe"]
    assert [e["event"] for e in audit_lines(audit_path)].count("answered") == 1


async def test_expired_is_refused(
    coordinator: InteractionCoordinator, store: Store, audit_path: Path
) -> None:
    """A row past its time (its kernel gone, so no timer fired) is expired on submit."""
    now = time.time()
    row = PendingRow(
        "ask_old", SESSION, "turn-0", "call_old", {"mode": "text"}, "pending", now - 10, now - 1,
        None, None,
    )  # fmt: skip
    store.add_pending(row, None)
    with pytest.raises(ExpiredRequest) as info:
        coordinator.submit(SESSION, "ask_old", [], "late answer")
    assert info.value.code == "expired"
    events = [e["event"] for e in audit_lines(audit_path)]
    assert events == ["expired", "rejected"]
    assert_rejected(audit_path, "expired")
    after = store.get_pending("ask_old")
    assert after is not None and after.status == "expired"
    assert after.result == {
        "selections": [],
        "customInput": "",
        "cancelled": True,
        "reason": "timeout",
    }
    # Asked again: still expired, nothing else changes.
    with pytest.raises(ExpiredRequest):
        coordinator.submit(SESSION, "ask_old", [], "later still")
    assert store.get_pending("ask_old") == after


async def test_invalid_answer_is_refused_and_the_question_stays_open(
    coordinator: InteractionCoordinator, store: Store, audit_path: Path
) -> None:
    asked = await start_ask(coordinator, "number")
    with pytest.raises(InvalidAnswer) as info:
        coordinator.submit(SESSION, asked.request_id, [], "forty-two")
    assert info.value.code == "invalid"
    assert "is not a number" in str(info.value)
    assert_rejected(audit_path, "invalid")
    row = store.get_pending(asked.request_id)
    assert row is not None and row.status == "pending"
    await still_waiting(asked)
    coordinator.submit(SESSION, asked.request_id, [], "42")
    tool = await asyncio.wait_for(asked.task, 5)
    assert json.loads(tool.content)["customInput"] == "42"
    # The rejected line never carries the free text either.
    assert "forty-two" not in audit_path.read_text("utf-8")


async def test_not_resumable_is_refused_in_a_process_that_cannot_continue_the_turn(
    coordinator: InteractionCoordinator, store: Store, audit_path: Path, workspace: Path
) -> None:
    """A second coordinator (a restarted kernel) over the same store has no live Future."""
    asked = await start_ask(coordinator)
    other_store = Store(store.path)
    try:
        other = InteractionCoordinator(other_store, AuditLog(audit_path), workspace=workspace)
        with pytest.raises(NotResumable) as info:
            other.submit(SESSION, asked.request_id, ["safe"])
        assert info.value.code == "not_resumable"
        assert_rejected(audit_path, "not_resumable")
        row = store.get_pending(asked.request_id)
        assert row is not None and row.status == "pending"

        # Once that process can resume the saved turn, the answer goes to on_orphan.
        orphaned: list[tuple[PendingRow, dict[str, Any]]] = []
        other.can_resume = lambda r: store.turn_state(r.request_id) is not None
        other.on_orphan = lambda r, result: orphaned.append((r, result))
        other.submit(SESSION, asked.request_id, ["safe"])
        assert len(orphaned) == 1
        assert orphaned[0][0].tool_call_id == "call_ask_1"
        assert orphaned[0][1] == AskUserResult(selections=["safe"]).wire()
    finally:
        other_store.close()
    # The first process's waiter was not resolved by the other process (no shared Future).
    await still_waiting(asked)
    asked.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asked.task
    # Consumed once: the stop did not overwrite the answer given elsewhere.
    row = store.get_pending(asked.request_id)
    assert row is not None and row.status == "answered"


async def test_refusals_are_interaction_errors_with_their_code(
    coordinator: InteractionCoordinator,
) -> None:
    codes = {
        cls.code
        for cls in (
            UnknownRequest,
            ForeignSession,
            AlreadyAnswered,
            ExpiredRequest,
            InvalidAnswer,
            NotResumable,
        )
    }
    assert codes == {
        "unknown",
        "foreign_session",
        "duplicate",
        "expired",
        "invalid",
        "not_resumable",
    }
    assert all(
        issubclass(c, InteractionError)
        for c in (UnknownRequest, ForeignSession, AlreadyAnswered, ExpiredRequest)
    )


# check_answer per mode --------------------------------------------------------------------------
def body(mode: str, allow_custom: bool = False) -> dict[str, Any]:
    options = OPTIONS if mode in ("single", "multiple", "toggle") else []
    return {"mode": mode, "options": options, "allow_custom": allow_custom}


GOOD: list[tuple[str, bool, list[str], str]] = [
    ("single", False, ["safe"], ""),
    ("single", True, ["safe"], "with a note"),
    ("single", True, [], "something else entirely"),
    ("multiple", False, ["safe", "implement"], ""),
    ("multiple", False, ["implement"], ""),
    ("multiple", True, ["safe"], "plus this"),
    ("toggle", False, ["safe"], ""),
    ("toggle", False, ["safe", "implement"], ""),
    ("text", False, [], "Ms. Zhang"),
    ("number", False, [], "42"),
    ("number", False, [], "-3.5"),
    ("number", False, [], "1e3"),
    ("number", False, [], "2e3"),
    ("number", False, [], "+4"),
    ("number", False, [], ".5"),
    ("number", False, [], "1."),
    ("date", False, [], "2026-02-28"),
    ("date", False, [], "2024-02-29"),
    ("directory", False, [], "data"),
    ("directory", False, [], "data/raw"),
    ("directory", False, [], "./data/../data/raw"),
    ("directory", False, [], "."),
    ("directory", False, [], "not/yet/created"),
]

REFUSED: list[tuple[str, bool, list[str], str, str]] = [
    ("single", False, [], "", "at least one"),
    ("single", False, ["safe", "implement"], "", "one option"),
    ("single", False, ["nope"], "", "Not an option"),
    ("single", False, ["safe"], "extra", "free-text"),
    ("single", False, [], "only text", "free-text"),
    ("multiple", False, ["safe", "safe"], "", "twice"),
    ("multiple", False, ["safe", "other"], "", "Not an option"),
    ("multiple", False, ["safe"], "extra", "free-text"),
    ("toggle", False, [], "", "at least one"),
    ("text", False, [], "", "type an answer"),
    ("text", False, [], "   \n", "type an answer"),
    ("text", False, ["safe"], "hi", "Not an option"),
    ("number", False, [], "abc", "not a number"),
    ("number", False, [], "nan", "finite"),
    ("number", False, [], "inf", "finite"),
    ("number", False, [], "-Infinity", "finite"),
    ("number", False, [], "", "type an answer"),
    ("number", False, [], " 7 ", "spaces around it"),
    ("number", False, [], "1_000", "not a number"),
    ("number", False, [], "0x10", "not a number"),
    ("number", False, [], "1e999", "finite"),
    ("date", False, [], " 2026-01-02", "spaces around it"),
    ("date", False, [], "2026-01-02\n", "spaces around it"),
    ("date", False, [], "2026-13-01", "YYYY-MM-DD"),
    ("date", False, [], "2026-02-30", "YYYY-MM-DD"),
    ("date", False, [], "01/02/2026", "YYYY-MM-DD"),
    ("date", False, [], "2026-1-2", "YYYY-MM-DD"),
    ("date", False, [], "20260102", "YYYY-MM-DD"),
    ("date", False, [], "2026-W01-1", "YYYY-MM-DD"),
    ("date", False, [], "tomorrow", "YYYY-MM-DD"),
    ("directory", False, [], "../x", "outside"),
    ("directory", False, [], "data/../../x", "outside"),
    ("directory", False, [], "/etc", "outside"),
    ("directory", False, [], "", "type an answer"),
]


@pytest.mark.parametrize(
    ("mode", "allow_custom", "selections", "custom"),
    GOOD,
    ids=[f"{g[0]}-{g[2]}-{g[3]!r}" for g in GOOD],
)
def test_check_answer_accepts(
    mode: str, allow_custom: bool, selections: list[str], custom: str, workspace: Path
) -> None:
    check_answer(body(mode, allow_custom), selections, custom, workspace)


@pytest.mark.parametrize(
    ("mode", "allow_custom", "selections", "custom", "words"),
    REFUSED,
    ids=[f"{r[0]}-{r[2]}-{r[3]!r}" for r in REFUSED],
)
def test_check_answer_refuses(
    mode: str,
    allow_custom: bool,
    selections: list[str],
    custom: str,
    words: str,
    workspace: Path,
) -> None:
    with pytest.raises(InvalidAnswer) as info:
        check_answer(body(mode, allow_custom), selections, custom, workspace)
    assert words in str(info.value)


def test_directory_through_a_symlink_that_leaves_the_workspace_is_refused(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (workspace / "escape").symlink_to(outside, target_is_directory=True)
    (workspace / "inside").symlink_to(workspace / "data", target_is_directory=True)
    with pytest.raises(InvalidAnswer, match="outside"):
        check_answer(body("directory"), [], "escape", workspace)
    with pytest.raises(InvalidAnswer, match="outside"):
        check_answer(body("directory"), [], "escape/sub", workspace)
    check_answer(body("directory"), [], "inside", workspace)  # a link that stays inside is fine


# expiry, stop, threads ---------------------------------------------------------------------------
async def test_expiry_resolves_the_waiter_with_a_timeout(
    store: Store, audit_path: Path, workspace: Path
) -> None:
    coordinator = InteractionCoordinator(
        store, AuditLog(audit_path), workspace=workspace, expiry_seconds=0.05
    )
    asked = await start_ask(coordinator)
    tool = await asyncio.wait_for(asked.task, 5)
    timeout = {"selections": [], "customInput": "", "cancelled": True, "reason": "timeout"}
    assert json.loads(tool.content) == timeout and tool.data == timeout
    assert tool.stop_turn and tool.summary == "timed out"
    row = store.get_pending(asked.request_id)
    assert row is not None and row.status == "expired" and row.result == timeout
    lines = audit_lines(audit_path)
    assert [e["event"] for e in lines] == ["asked", "expired"]
    assert lines[1]["outcome"] == "expired" and lines[1]["reason"] == "timeout"
    resolved = [d for t, d in asked.emitted if t == "user_input_resolved"]
    assert resolved and resolved[0]["reason"] == "timeout"
    with pytest.raises(ExpiredRequest):
        coordinator.submit(SESSION, asked.request_id, ["safe"])


async def test_stopping_the_turn_cancels_the_question(
    coordinator: InteractionCoordinator, store: Store, audit_path: Path
) -> None:
    asked = await start_ask(coordinator)
    asked.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asked.task
    row = store.get_pending(asked.request_id)
    assert row is not None and row.status == "cancelled"
    assert row.result == {
        "selections": [],
        "customInput": "",
        "cancelled": True,
        "reason": "turn_stopped",
    }
    assert not coordinator.is_live(asked.request_id)
    last = audit_lines(audit_path)[-1]
    assert last["event"] == "cancelled" and last["reason"] == "turn_stopped"
    with pytest.raises(AlreadyAnswered):
        coordinator.submit(SESSION, asked.request_id, ["safe"])
    assert_rejected(audit_path, "duplicate")


async def test_stopping_the_turn_tells_the_open_card_so_it_does_not_stay_answerable(
    coordinator: InteractionCoordinator,
) -> None:
    # The card follows user_input_resolved; without it the form stays open after Stop and a
    # click is refused as "already answered".
    asked = await start_ask(coordinator)
    asked.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asked.task
    resolved = [d for t, d in asked.emitted if t == "user_input_resolved"]
    assert len(resolved) == 1
    assert resolved[0]["id"] == asked.request_id and resolved[0]["tool_call_id"] == "call_ask_1"
    assert resolved[0]["cancelled"] is True and resolved[0]["reason"] == "turn_stopped"


async def test_an_unwritable_audit_log_never_strands_the_turn(
    store: Store, tmp_path: Path, workspace: Path
) -> None:
    # A full disk or a read-only audit folder: the line is lost, the answer is not.
    blocker = tmp_path / "audit-is-a-file"
    blocker.write_text("x")
    coordinator = InteractionCoordinator(
        store, AuditLog(blocker / "interactions.jsonl"), workspace=workspace
    )
    asked = await start_ask(coordinator)
    result = coordinator.submit(SESSION, asked.request_id, ["safe"])
    assert result.selections == ["safe"]
    tool = await asyncio.wait_for(asked.task, 5)
    assert json.loads(tool.content)["selections"] == ["safe"]
    with pytest.raises(AlreadyAnswered):
        coordinator.submit(SESSION, asked.request_id, ["safe"])
    stopped = await start_ask(coordinator, call_id="call_ask_2")
    stopped.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopped.task


async def test_an_answer_racing_a_stop_never_resumes_the_stopped_turn_as_an_orphan(
    coordinator: InteractionCoordinator, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Submit on a subshell thread saw the question live; before it consumed the row, the
    # loop thread stopped the turn and dropped the waiter. The answer belongs to that stopped
    # turn: it must not start the saved turn a second time through the restart path.
    asked = await start_ask(coordinator)
    orphans: list[str] = []
    coordinator.on_orphan = lambda row, _result: orphans.append(row.request_id)
    coordinator.can_resume = lambda _row: True  # the saved state is there, as in a kernel
    real = store.resolve_pending

    def stop_lands_first(*args: Any) -> bool:
        coordinator.calls._waiters.pop(asked.request_id, None)  # what ask's finally does on Stop
        return real(*args)

    monkeypatch.setattr(store, "resolve_pending", stop_lands_first)
    coordinator.submit(SESSION, asked.request_id, ["safe"])
    assert orphans == []
    asked.task.cancel()


async def test_submit_from_another_thread_resolves_the_future_on_its_loop(
    coordinator: InteractionCoordinator,
) -> None:
    """Widget callbacks may run on a subshell thread (DESIGN.md section 2)."""
    asked = await start_ask(coordinator)
    loop_thread = threading.get_ident()
    seen: dict[str, Any] = {}

    def submit() -> None:
        seen["thread"] = threading.get_ident()
        try:
            seen["result"] = coordinator.submit(SESSION, asked.request_id, ["implement"])
        except Exception as exc:  # surfaced below, not lost in the thread
            seen["error"] = exc

    worker = threading.Thread(target=submit)
    worker.start()
    # Joining in a thread keeps this loop free to run the resolution callback.
    await asyncio.to_thread(worker.join, 5)
    assert "error" not in seen, seen.get("error")
    assert seen["thread"] != loop_thread
    tool = await asyncio.wait_for(asked.task, 5)
    assert json.loads(tool.content)["selections"] == ["implement"]


# consume once, across processes -------------------------------------------------------------------
RACER = r"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from deeptutor_jupyter.store.db import Store

store = Store(Path(sys.argv[1]))
name = sys.argv[2]
print("ready", flush=True)
for line in sys.stdin:
    request_id = line.strip()
    if not request_id:
        break
    won = store.resolve_pending(request_id, "answered", {"by": name}, time.time())
    print("1" if won else "0", flush=True)
store.close()
"""


def test_two_processes_racing_on_the_same_request_consume_it_once(
    store: Store, tmp_path: Path
) -> None:
    rounds = 50
    now = time.time()
    for i in range(rounds):
        row = PendingRow(
            f"ask_race_{i}", SESSION, "turn-r", f"call_{i}", {"mode": "text"}, "pending",
            now, now + 3600, None, None,
        )  # fmt: skip
        store.add_pending(row, {"loop": {}})
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(store.path), name, str(REPO)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in ("A", "B")
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        wins = {"A": 0, "B": 0}
        for i in range(rounds):
            # Both processes get the request id at the same moment and race for the row.
            for p in procs:
                assert p.stdin is not None
                p.stdin.write(f"ask_race_{i}\n")
                p.stdin.flush()
            outcomes = []
            for p in procs:
                assert p.stdout is not None
                outcomes.append(p.stdout.readline().strip())
            assert sorted(outcomes) == ["0", "1"], (i, outcomes)
            winner = "A" if outcomes[0] == "1" else "B"
            wins[winner] += 1
            row = store.get_pending(f"ask_race_{i}")
            assert row is not None and row.status == "answered"
            assert row.result == {"by": winner}
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("\n")
            p.stdin.close()
        for p in procs:
            assert p.wait(30) == 0, p.stderr.read() if p.stderr else ""
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            for stream in (p.stdout, p.stderr):
                if stream is not None:
                    stream.close()
    assert wins["A"] + wins["B"] == rounds
    assert store.pending_for() == []


# what a closed question says, wrong types, a store that cannot be written -----------------------
async def test_after_cancel_a_submission_says_the_question_was_cancelled(
    coordinator: InteractionCoordinator,
) -> None:
    asked = await start_ask(coordinator)
    coordinator.submit(SESSION, asked.request_id, [], "", cancelled=True)
    await asyncio.wait_for(asked.task, 5)
    with pytest.raises(AlreadyAnswered, match="This question was cancelled") as info:
        coordinator.submit(SESSION, asked.request_id, ["safe"])
    assert "already answered" not in str(info.value)


async def test_after_stop_a_submission_says_the_turn_was_stopped(
    coordinator: InteractionCoordinator,
) -> None:
    asked = await start_ask(coordinator)
    asked.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asked.task
    with pytest.raises(AlreadyAnswered, match="This turn was stopped"):
        coordinator.submit(SESSION, asked.request_id, ["safe"])


async def test_after_an_answer_a_submission_still_says_already_answered(
    coordinator: InteractionCoordinator,
) -> None:
    asked = await start_ask(coordinator)
    coordinator.submit(SESSION, asked.request_id, ["safe"])
    await asyncio.wait_for(asked.task, 5)
    with pytest.raises(AlreadyAnswered, match="already answered"):
        coordinator.submit(SESSION, asked.request_id, ["implement"])


@pytest.mark.parametrize(
    ("selections", "custom", "cancelled", "words"),
    [
        (None, 12345, False, "custom_input must be a string, not int"),
        (None, None, False, "custom_input must be a string"),
        ("safe", "", False, "selections must be a list"),
        ([1], "", False, "selections must be a list"),
        (None, "", "yes", "cancelled must be True or False"),
    ],
)
async def test_wrong_types_are_an_invalid_answer_and_change_nothing(
    coordinator: InteractionCoordinator,
    store: Store,
    selections: Any,
    custom: Any,
    cancelled: Any,
    words: str,
) -> None:
    asked = await start_ask(coordinator, "text")
    with pytest.raises(InvalidAnswer, match=words) as info:
        coordinator.submit(SESSION, asked.request_id, selections, custom, cancelled)
    assert info.value.code == "invalid"
    row = store.get_pending(asked.request_id)
    assert row is not None and row.status == "pending"
    coordinator.submit(SESSION, asked.request_id, None, "now as text")
    tool = await asyncio.wait_for(asked.task, 5)
    assert json.loads(tool.content)["customInput"] == "now as text"


async def test_a_full_disk_while_answering_is_an_interaction_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """submit_user_input: a StoreError becomes StoreUnavailable, an InteractionError."""
    import deeptutor_jupyter
    from deeptutor_jupyter.interaction.coordinator import StoreUnavailable
    from deeptutor_jupyter.store.db import StoreError

    class FullCoordinator:
        def submit(self, *args: Any) -> dict[str, Any]:
            raise StoreError("The disk holding state.db is full; free some space.")

    from deeptutor_jupyter.runtime.session import TutorSession

    session = TutorSession("lesson.ipynb", resolve=lambda _flags: None)  # type: ignore[arg-type,return-value]
    session._coordinator = FullCoordinator()  # type: ignore[assignment]
    monkeypatch.setattr(deeptutor_jupyter, "_opened_session", lambda: session)
    with pytest.raises(InteractionError, match="is full") as info:
        deeptutor_jupyter.submit_user_input(SESSION, "ask_x", ["safe"])
    assert isinstance(info.value, StoreUnavailable) and info.value.code == "store"
