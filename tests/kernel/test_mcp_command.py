"""``%tutor mcp``: the configured MCP servers, their state and tools; env names, never values;
a bad table is a problem line, not an error. Listing starts no server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from tests.kernel.tutor_shell import tutor_shell

SETTINGS = """
[mcp_servers.calc]
command = "python"
args = ["calc_server.py"]
env = { CALC_TOKEN = "calc-token-0a9b8c7d6e" }

[mcp_servers.both]
command = "python"
url = "http://127.0.0.1:1/mcp"
"""


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    for name in list(os.environ):
        if name.startswith("DEEPTUTOR_") or name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.toml").write_text(SETTINGS)
    monkeypatch.setenv("DEEPTUTOR_HOME", str(home))
    monkeypatch.setenv("DEEPTUTOR_AUTO_CONSOLIDATE", "false")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.chdir(tmp_path)
    with tutor_shell() as sh:
        yield sh


def test_tutor_mcp_lists_servers_without_their_secrets(shell: InteractiveShell) -> None:
    with capture_output() as out:
        shell.run_line_magic("tutor", "mcp")
    shown = out.stdout + "".join(str(o.data) for o in out.outputs)
    assert (
        "| calc | `python calc_server.py` (env: CALC_TOKEN) | "
        "not started (starts at the next turn) |" in shown
    )
    assert (
        "mcp_servers.both ignored (table: Value error, give either command (stdio) or url" in shown
    )
    assert "calc-token-0a9b8c7d6e" not in shown
