"""The audit log keeps who/what/when of every ask_user, never the free text a learner typed."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.interaction.audit import AuditLog
from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator, InvalidAnswer
from deeptutor_jupyter.interaction.schema import AskUserArgs
from deeptutor_jupyter.providers.base import ToolCall
from deeptutor_jupyter.store.db import Store

SECRET = "hunter2-Zh4ng-老师-\u2603-SSN-078-05-1120"
SESSION = "nb-audit"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "state.db")
    yield s
    s.close()


def lines_of(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    return [json.loads(line) for line in raw.decode("utf-8").splitlines()]


async def ask_and_answer(
    coordinator: InteractionCoordinator, args: AskUserArgs, answer: dict[str, Any]
) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def emit(event: Any) -> None:
        if event.type == "user_input_required":
            seen.update(event.model_dump(exclude={"type", "explore"}))

    task = asyncio.get_running_loop().create_task(
        coordinator.ask(
            session_id=SESSION,
            turn_id="turn-a",
            call=ToolCall("call_secret", "ask_user", "{}"),
            args=args,
            emit=emit,
            snapshot=None,
        )
    )
    while not seen:
        await asyncio.sleep(0.005)
    coordinator.submit(SESSION, seen["id"], **answer)
    result = await asyncio.wait_for(task, 5)
    assert json.loads(result.content)["customInput"] == answer.get("custom_input", "")
    return seen


async def test_free_text_never_reaches_the_audit_file(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "audit" / "interactions.jsonl"
    coordinator = InteractionCoordinator(store, AuditLog(path), workspace=tmp_path)
    text = AskUserArgs(title="Who is your teacher?", mode="text")
    # A refused answer carrying the secret is audited too, and must not leak it either.
    refused = AskUserArgs(title="How many?", mode="number")

    body = await ask_and_answer(coordinator, text, {"custom_input": SECRET})
    choice = AskUserArgs.model_validate(
        {
            "title": "Pick",
            "mode": "multiple",
            "allowCustom": True,
            "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}],
        }
    )
    await ask_and_answer(coordinator, choice, {"selections": ["b"], "custom_input": SECRET * 2})

    seen: dict[str, Any] = {}
    task = asyncio.get_running_loop().create_task(
        coordinator.ask(
            session_id=SESSION,
            turn_id="turn-a",
            call=ToolCall("call_n", "ask_user", "{}"),
            args=refused,
            emit=lambda e: seen.update(e.model_dump()) if e.type == "user_input_required" else None,
            snapshot=None,
        )
    )
    while not seen:
        await asyncio.sleep(0.005)
    with pytest.raises(InvalidAnswer):
        coordinator.submit(SESSION, seen["id"], [], SECRET)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    raw = path.read_bytes()
    for needle in (SECRET, "hunter2", "Zh4ng", "老师", "078-05-1120"):
        assert needle.encode("utf-8") not in raw, needle
        assert json.dumps(needle).encode() not in raw  # nor escaped
    lines = lines_of(path)
    assert [e["event"] for e in lines] == [
        "asked",
        "answered",
        "asked",
        "answered",
        "asked",
        "rejected",
        "cancelled",
    ]
    assert lines[1]["custom_input_length"] == len(SECRET)
    assert lines[1]["request_id"] == body["id"] and lines[1]["tool_call_id"] == "call_secret"
    assert lines[3]["custom_input_length"] == len(SECRET) * 2
    assert lines[3]["selections"] == ["b"]
    for line in lines:
        assert line["session_id"] == SESSION and isinstance(line["ts"], float)
        assert "customInput" not in line and "custom_input" not in line
    for answered in (lines[1], lines[3]):
        assert answered["outcome"] == "answered"
        assert answered["asked_at"] <= answered["answered_at"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_lines_from_concurrent_writers_do_not_interleave(tmp_path: Path) -> None:
    path = tmp_path / "audit" / "interactions.jsonl"
    logs = [AuditLog(path), AuditLog(path)]  # two kernels, two objects, one file

    def write(log: AuditLog, name: str) -> None:
        for i in range(200):
            log.write(
                "answered",
                session_id=name,
                request_id=f"ask_{i}",
                selections=["x" * 50] * 20,  # long lines make a torn write visible
                custom_input=SECRET,
            )

    threads = [
        threading.Thread(target=write, args=(log, n)) for log, n in zip(logs, "AB", strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = lines_of(path)
    assert len(lines) == 400
    assert {e["session_id"] for e in lines} == {"A", "B"}
    assert all(e["custom_input_length"] == len(SECRET) for e in lines)
    assert SECRET.encode() not in path.read_bytes()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
