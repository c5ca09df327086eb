"""``deeptutor-jupyter schema events`` is the contract the sidebar's TypeScript types are generated
from: every event of a recorded turn (with a tool call, an ask_user answered, sources, done) must
validate against the schema the command prints, and an event that breaks it must not."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.runtime.session import AskOptions, TutorSession
from deeptutor_jupyter.store.db import Store
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec

ASK = {
    "title": "Which topic?",
    "mode": "multiple",
    "options": [{"id": "eig", "label": "Eigenvalues"}, {"id": "svd", "label": "SVD"}],
    "allowCustom": True,
}


def cli_schema(contract: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "deeptutor_jupyter.cli", "schema", contract],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return dict(json.loads(out))


def record_a_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    replies = [
        Reply(
            text="Let me compute.", tool_calls=[ToolCallSpec("calculate", {"expression": "2+2"})]
        ),
        Reply(tool_calls=[ToolCallSpec("ask_user", ASK, id="call_ask")]),
        Reply(text="Here is a set on eigenvalues.", chunks=["Here is ", "a set on eigenvalues."]),
    ]
    with FakeLLMServer(replies) as server:
        monkeypatch.setenv("DEEPTUTOR_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("DEEPTUTOR_PROVIDER", "custom")
        monkeypatch.setenv("DEEPTUTOR_BASE_URL", server.url)
        monkeypatch.setenv("DEEPTUTOR_MODEL", "fake")

        async def main() -> str:
            session = TutorSession("lesson.ipynb", resolve=lambda f: resolve_settings(flags=f))
            resolved = session.resolve({})
            turn = session.ask("Quiz me", resolved, AskOptions())
            for _ in range(200):
                rows = session.pending(True) if session.is_open else []
                if rows:
                    break
                await asyncio.sleep(0.02)
            session.submit(rows[0].session_id, rows[0].request_id, ["eig"], "only 2x2")
            assert turn.task is not None
            await asyncio.wait_for(turn.task, 20)
            for model in session.models.values():
                await model.aclose()
            return turn.turn_id

        turn_id = asyncio.run(main())
    store = Store(tmp_path / "home" / "state.db")
    try:
        rows = store.events_with_time(turn_id)
    finally:
        store.close()
    return [
        {**data, "type": t, "seq": seq, "turn_id": turn_id, "ts": ts} for seq, t, data, ts in rows
    ]


def test_every_event_of_a_recorded_turn_validates_against_the_printed_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = record_a_turn(tmp_path, monkeypatch)
    kinds = {e["type"] for e in events}
    assert {"turn_started", "tool_call", "tool_result", "user_input_required"} <= kinds
    assert {"user_input_resolved", "content", "done"} <= kinds
    schema = cli_schema("events")
    validator = jsonschema.Draft202012Validator(schema)
    for event in events:
        validator.validate(event)
    # The schema is not vacuous: a wrong field type or an unknown event type is refused.
    done = next(e for e in events if e["type"] == "done")
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**done, "status": 3})
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**done, "type": "exploded"})
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1))


def test_the_ask_user_schema_names_the_payload_and_the_arguments() -> None:
    schema = cli_schema("ask_user")
    payload = schema["$defs"]["AskUserPayload"]
    assert {"id", "tool_call_id", "session_id", "mode", "expires_at"} <= set(payload["required"])
    args = schema["$defs"]["AskUserArgs"]
    assert set(args["properties"]["mode"]["enum"]) == {
        "single",
        "multiple",
        "text",
        "number",
        "date",
        "directory",
        "toggle",
    }
