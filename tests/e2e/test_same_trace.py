"""One runtime for every surface: the same scripted turn leaves the same trace whether it ran
in a notebook's kernel (widgets, a task on the kernel loop) or in a terminal IPython (printed,
run to the end in the cell)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.e2e.kernel_driver import KernelDriver, kernel_env

pytestmark = pytest.mark.e2e

COMPARED = ("question", "answer_summary", "tools", "status", "model", "ask_user", "surface")


def script() -> list[Reply]:
    return [
        Reply(text="Computing.", tool_calls=[ToolCallSpec("calculate", {"expression": "6*7"})]),
        Reply(text="6 times 7 is **42**."),
    ]


def traces(home: Path) -> list[dict[str, Any]]:
    files = sorted((home / "memory" / "trace").rglob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line]


def in_a_kernel(tmp_path: Path) -> dict[str, Any]:
    with FakeLLMServer(script()) as server:
        k = KernelDriver(kernel_env(tmp_path, server), cwd=tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter")
            k.execute("%tutor What is 6 times 7?")
            k.execute("import deeptutor_jupyter as d; t = await d.wait_for_turns(30)")
            k.wait_for(lambda: traces(tmp_path / "home"))
        finally:
            k.shutdown()
    [record] = traces(tmp_path / "home")
    return record


def in_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    with FakeLLMServer(script()) as server:
        for name in list(os.environ):
            if name.startswith("DEEPTUTOR_") or name.endswith("_API_KEY"):
                monkeypatch.delenv(name)
        env = kernel_env(tmp_path, server)
        for name in ("DEEPTUTOR_HOME", "DEEPTUTOR_PROVIDER", "DEEPTUTOR_BASE_URL"):
            monkeypatch.setenv(name, env[name])
        monkeypatch.setenv("DEEPTUTOR_MODEL", env["DEEPTUTOR_MODEL"])
        monkeypatch.setenv("DEEPTUTOR_AUTO_CONSOLIDATE", "false")
        monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
        monkeypatch.chdir(tmp_path)
        shell = InteractiveShell.instance()
        try:
            shell.run_line_magic("load_ext", "deeptutor_jupyter")
            shell.run_line_magic("tutor", "What is 6 times 7?")
        finally:
            magics = shell.magics_manager.registry.get("TutorMagics")
            state = getattr(magics, "state", None)
            if state is not None:
                state.session.close()
            InteractiveShell.clear_instance()
    [record] = traces(tmp_path / "home")
    return record


def test_the_terminal_and_the_cell_leave_the_same_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cell").mkdir()
    (tmp_path / "terminal").mkdir()
    cell = in_a_kernel(tmp_path / "cell")
    terminal = in_a_terminal(tmp_path / "terminal", monkeypatch)
    assert cell["tools"] == ["calculate"] and cell["status"] == "done"
    assert "42" in cell["answer_summary"]
    assert {k: cell[k] for k in COMPARED} == {k: terminal[k] for k in COMPARED}
