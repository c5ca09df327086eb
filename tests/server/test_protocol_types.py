"""The panel's TypeScript protocol (labextension/src/protocol.ts) matches the Python runtime: the
ask_user modes and payload fields, the event types, and the comm target. A drift guard: a field
added on one side and not the other fails here, not in a learner's browser."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from deeptutor_jupyter.interaction.schema import AskUserArgs, Mode, payload
from deeptutor_jupyter.kernel.comm import TARGET
from deeptutor_jupyter.memory.trace import TRACE_MIME, TraceRecord
from deeptutor_jupyter.runtime.events import EventType

PROTOCOL = Path(__file__).resolve().parents[2] / "labextension" / "src" / "protocol.ts"


def ts() -> str:
    return PROTOCOL.read_text(encoding="utf-8")


def union(name: str) -> set[str]:
    match = re.search(rf"export type {name} =([^;]+);", ts())
    assert match, f"no type {name} in protocol.ts"
    return set(re.findall(r"'([a-z_]+)'", match.group(1)))


def fields(interface: str) -> set[str]:
    match = re.search(rf"export interface {interface}(?: extends \w+)? \{{(.*?)\n\}}", ts(), re.S)
    assert match, f"no interface {interface} in protocol.ts"
    return set(re.findall(r"^\s+(\w+)\??:", match.group(1), re.M))


def test_the_ask_user_modes_match() -> None:
    assert union("AskMode") == set(typing.get_args(Mode))


def test_every_payload_field_is_typed_in_the_panel() -> None:
    args = AskUserArgs.model_validate(
        {"title": "t", "mode": "single", "options": [{"id": "a", "label": "A"}]}
    )
    body = payload(args, request_id="r", tool_call_id="c", session_id="s", expires_at=1.0)
    assert set(body) == fields("InputRequest")
    assert set(body["options"][0]) == fields("InputOption")


def test_the_event_types_match() -> None:
    assert union("EventType") == set(typing.get_args(EventType))


def test_the_comm_target_and_trace_mime_match() -> None:
    assert f"COMM_TARGET = '{TARGET}'" in ts()
    assert f"TRACE_MIME = '{TRACE_MIME}'" in ts()


def test_the_trace_record_fields_match() -> None:
    assert fields("TraceRecord") == set(TraceRecord.model_fields)
