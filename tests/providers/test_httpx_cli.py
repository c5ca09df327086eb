"""httpx's command line is not imported where it cannot load (providers/httpx_cli.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import json, sys
{missing}
{first}
import httpx
print(json.dumps({{"main": httpx.main.__module__, "cli": sorted(
    m for m in ("click", "pygments") if m in sys.modules), "marked": "httpx._main" in sys.modules
    and sys.modules["httpx._main"] is None}}))
"""


def probe(first: str, path: Path | None = None) -> dict[str, object]:
    env = dict(os.environ)
    # rich missing, whatever is installed here (find_spec and import both see None)
    missing = "" if path is not None else 'sys.modules["rich"] = None'

    if path is not None:  # a package shadowing nothing, found first: "rich is installed"
        env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")])
    code = PROBE.format(first=first, missing=missing)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_without_rich_httpx_keeps_its_fallback_main_and_skips_click() -> None:
    plain = probe("")
    ours = probe("import deeptutor_jupyter.providers")
    # Without rich, httpx's own import of its CLI fails after importing click and pygments
    # (both installed here), and it falls back to a main defined in httpx itself.
    assert plain == {"main": "httpx", "cli": ["click", "pygments"], "marked": False}
    assert ours == {"main": "httpx", "cli": [], "marked": True}  # the same main, for less


def test_with_all_three_installed_httpx_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "rich").mkdir()
    (tmp_path / "rich" / "__init__.py").write_text("", encoding="utf-8")
    got = probe("import deeptutor_jupyter.providers", tmp_path)
    assert got["marked"] is False  # httpx tried its CLI itself (this empty rich then fails it)
    assert got["cli"] == ["click", "pygments"]
