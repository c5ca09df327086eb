"""MCP servers in a real kernel: ``%load_ext`` does not import the SDK; a stdio server of
settings.toml starts at the first turn on the kernel's own loop, its tool (called without
load_tools) answers, ``%tutor mcp`` shows it ready, and the server ends with the kernel."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.e2e.kernel_driver import KernelDriver

pytestmark = pytest.mark.e2e

SERVER = Path(__file__).resolve().parents[1] / "tools" / "mcp_calc_server.py"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_an_mcp_tool_answers_in_a_kernel_and_its_server_ends_with_the_kernel(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    pid_file = tmp_path / "calc.pid"
    (home / "settings.toml").write_text(
        f"[mcp_servers.calc]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVER))}]\n"
        f"env = {{ CALC_PID_FILE = {json.dumps(str(pid_file))} }}\n"
    )
    fake_llm.extend(
        [
            Reply(tool_calls=[ToolCallSpec("mcp__calc__add", {"a": 2, "b": 3}, id="m1")]),
            Reply(text="Five."),
        ]
    )
    loaded = kernel.execute("import sys; print(sorted(m for m in sys.modules if m == 'mcp'))")
    assert kernel.stream_text(loaded).strip() == "[]"  # %load_ext did not import the SDK
    kernel.execute("%tutor add 2 and 3 with the calculator server")
    kernel.execute("import deeptutor_jupyter as d; _t = await d.wait_for_turns(60)", timeout=90)
    view = kernel.with_class("dt-turn")[0]
    assert "Five." in kernel.markdown_in(view)
    result = next(m for m in fake_llm.requests[1].body["messages"] if m.get("tool_call_id") == "m1")
    assert result["content"] == "5"
    listing = kernel.stream_text(kernel.execute("%tutor mcp")) + json.dumps(
        [m["content"] for m in kernel.iopub if m["header"]["msg_type"] == "display_data"]
    )
    assert "| ready | `mcp__calc__add`" in listing
    pid = int(pid_file.read_text())
    assert alive(pid)
    kernel.shutdown()  # the kernel is killed: the server sees its stdin close and ends
    deadline = time.monotonic() + 20
    while alive(pid):
        assert time.monotonic() < deadline, "the MCP server outlived its kernel"
        time.sleep(0.05)
