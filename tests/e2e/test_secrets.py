"""The configured API key appears nowhere a turn writes or shows: not in state.db (event data,
tool results, history), not in the trace JSONL, not in the widgets or the saved-notebook bundle,
even when a tool reads it from a variable and when the endpoint echoes it split across deltas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.e2e.kernel_driver import SECRET, KernelDriver

pytestmark = pytest.mark.e2e


def every_file_under(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def test_the_key_is_scrubbed_from_everything_persisted_or_shown(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    half = len(SECRET) // 2
    fake_llm.extend(
        [
            Reply(tool_calls=[ToolCallSpec("inspect_variable", {"name": "cfg"}, id="v1")]),
            # An endpoint that echoes the key, cut in the middle of it across two deltas.
            Reply(chunks=["Your key is ", SECRET[:half], SECRET[half:], "; keep it private."]),
        ]
    )
    kernel.execute(f"cfg = {{'token': {SECRET!r}, 'n': 3}}")
    kernel.execute("%tutor what is in cfg")
    kernel.execute("import deeptutor_jupyter as d; _t = await d.wait_for_turns(30)")
    kernel.wait_for(lambda: list((tmp_path / "home" / "memory" / "trace").rglob("*.jsonl")))

    view = kernel.with_class("dt-turn")[0]
    shown = kernel.markdown_in(view)
    assert "Your key is [redacted]; keep it private." in shown
    home = every_file_under(tmp_path / "home")
    assert SECRET.encode() not in home
    assert b"[redacted]" in home  # the scrubbed answer and tool data were saved, not dropped
    outputs = json.dumps([m["content"] for m in kernel.iopub])
    assert SECRET not in outputs.replace(f"cfg = {{'token': {SECRET!r}", "")  # the cell itself
    assert "[redacted]" in outputs
