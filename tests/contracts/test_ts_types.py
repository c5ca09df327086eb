"""The panel's TypeScript types are generated from the runtime's pydantic models
(scripts/schema_ts.py writes labextension/src/schema.ts), and the panel is compiled against them.
A model changed without regenerating fails here, not in a learner's browser."""

from __future__ import annotations

import re
import subprocess
import sys
import typing
from pathlib import Path

from deeptutor_jupyter.interaction.schema import Mode
from deeptutor_jupyter.kernel.comm import TARGET
from deeptutor_jupyter.memory.trace import TRACE_MIME
from deeptutor_jupyter.runtime.events import EventType

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "labextension" / "src"
SCRIPT = ROOT / "scripts" / "schema_ts.py"


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_schema_ts_is_what_the_models_generate() -> None:
    checked = run("--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_stale_file_makes_the_check_fail(tmp_path: Path) -> None:
    # The check compares with the committed file: a stale copy is reported, not accepted.
    target = SRC / "schema.ts"
    kept = target.read_text(encoding="utf-8")
    try:
        target.write_text(kept.replace("tool_call_id: string;", "toolCallId: string;", 1))
        stale = run("--check")
    finally:
        target.write_text(kept, encoding="utf-8")
    assert stale.returncode == 1 and "schema.ts is stale" in stale.stdout


def test_the_generated_union_names_every_event_and_mode() -> None:
    text = (SRC / "schema.ts").read_text(encoding="utf-8")
    union = re.search(r"export type TurnEvent =(.*?);", text, re.S)
    assert union
    declared = set()
    for name in re.findall(r"\w+", union.group(1)):
        body = re.search(rf"export interface {name} \{{(.*?)\n\}}", text, re.S)
        assert body, name
        declared |= set(re.findall(r"^  type: '([a-z_]+)';$", body.group(1), re.M))
    assert declared == set(typing.get_args(EventType))
    modes = re.search(r"export interface AskUserPayload \{.*?\n  mode: ([^;]+);", text, re.S)
    assert modes and set(re.findall(r"'(\w+)'", modes.group(1))) == set(typing.get_args(Mode))
    # One naming style: no camelCase field on the wire the panel reads.
    fields = re.findall(r"^  (\w+)\??: ", text, re.M)
    assert fields and not [f for f in fields if f != f.lower()]


def test_the_panel_uses_the_generated_types_not_copies() -> None:
    protocol = (SRC / "protocol.ts").read_text(encoding="utf-8")
    assert "from './schema'" in protocol
    for name in ("AskUserPayload", "TurnEvent", "PendingQuestion", "TraceRecord"):
        assert not re.search(rf"export (interface|type) {name}\b", protocol), name
    assert f"COMM_TARGET = '{TARGET}'" in protocol
    assert f"TRACE_MIME = '{TRACE_MIME}'" in protocol
