"""``benchmarks/ask_user_latency.py --quick`` still runs in a real kernel and prints its lines.

No timing is asserted: benchmarks print, tests check that they run (benchmarks/README.md).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def test_ask_user_latency_quick_runs_and_prints_its_labelled_lines() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "ask_user_latency.py"), "--quick"],
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, f"exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
    for label in (
        "ask_user latency benchmark: real kernel",
        "3 rounds + 1 warm-up",
        "signal: click comm_msg sent",
        "click -> receipt (card shows the answer)",
        "click -> resumed output (next round's text)",
        "goal < 20 ms (click -> resumed output, median):",
        "RESULT: click -> resumed output median",
    ):
        assert label in out.stdout, (label, out.stdout)
    assert "median" in out.stdout and "p90" in out.stdout
