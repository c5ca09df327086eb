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


def test_a_stale_contracts_file_makes_the_check_fail() -> None:
    target = SRC / "contracts.ts"
    kept = target.read_text(encoding="utf-8")
    try:
        target.write_text(kept.replace("'low-signal'", "'low_signal'", 1), encoding="utf-8")
        stale = run("--check")
    finally:
        target.write_text(kept, encoding="utf-8")
    assert stale.returncode == 1 and "contracts.ts is stale" in stale.stdout


# What contracts.ts generates; a hand-written twin anywhere else in the panel is a copy that
# would drift from the server.
GENERATED_LISTS = ("ASK_MODES", "CHOICE_MODES", "ACTIONS", "MODES", "DELETE_REASONS")
GENERATED_BODIES = (
    "MemoryDocument",
    "MemoryEntry",
    "ConsolidationPreview",
    "PreviewChange",
    "PreviewTrace",
    "KnowledgeBaseInfo",
    "KnowledgeState",
    "KbJob",
    "DocumentsReply",
    "SaveMemoryRequest",
)


def test_the_panel_uses_the_generated_contracts_not_copies() -> None:
    contracts = (SRC / "contracts.ts").read_text(encoding="utf-8")
    for name in GENERATED_BODIES:
        assert f"export interface {name} {{" in contracts, name
    for name in GENERATED_LISTS:
        assert f"export const {name} = [" in contracts, name
    copies = []
    for path in sorted(SRC.glob("*.ts*")):
        if path.name in ("contracts.ts", "schema.ts") or path.name.endswith(".test.ts"):
            continue  # tests may spell values out: they check them
        text = path.read_text(encoding="utf-8")
        copies += [
            f"{path.name}: {m.group(0)}"
            for m in re.finditer(
                rf"export (?:interface|type) ({'|'.join(GENERATED_BODIES)})\b", text
            )
        ]
        # A list literal of the generated values (e.g. ['update', 'audit', ...]) is a copy too.
        copies += [
            f"{path.name}: {m.group(0)[:40]}"
            for m in re.finditer(r"\[\s*'(?:update|stale|single|ask)',\s*'", text)
        ]
    assert copies == []
    # The answer rule is compiled from the generated pattern, not written again.
    askuser = (SRC / "askuser.ts").read_text(encoding="utf-8")
    assert "NUMBER_PATTERN" in askuser and "ISO_DATE_PATTERN" in askuser


def test_the_generated_lists_are_the_python_ones() -> None:
    from deeptutor_jupyter.interaction.answers import NUMBER_PATTERN
    from deeptutor_jupyter.kernel.comm_messages import ACTIONS, PanelAction
    from deeptutor_jupyter.memory.consolidate import MODES, Mode
    from deeptutor_jupyter.memory.ops import DELETE_REASONS, DeleteReason

    # Python derives each list from its Literal or union; nothing is typed twice there either.
    assert typing.get_args(Mode) == MODES and typing.get_args(DeleteReason) == DELETE_REASONS
    union = typing.get_args(typing.get_args(PanelAction)[0])
    assert len(ACTIONS) == len(union) and all(
        m.model_fields["action"].annotation == typing.Literal[a]
        for m, a in zip(union, ACTIONS, strict=True)
    )
    contracts = (SRC / "contracts.ts").read_text(encoding="utf-8")
    for name, values in (
        ("ACTIONS", ACTIONS),
        ("MODES", MODES),
        ("DELETE_REASONS", DELETE_REASONS),
    ):
        found = re.search(rf"export const {name} = \[(.*?)\] as const;", contracts, re.S)
        assert found and re.findall(r"'([^']*)'", found.group(1)) == list(values), name
    assert NUMBER_PATTERN.replace("\\", "\\\\") in contracts
