"""benchmarks/sandbox.py still runs and prints its labelled lines. No timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "sandbox.py"


def test_sandbox_benchmark_quick() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCHMARK), "--quick"],
        cwd=str(BENCHMARK.parent.parent),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, f"exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
    for line in (
        "sandbox benchmark: 3 iterations",
        "bare python -c     median",
        "sandbox, rlimit    median",
        "ratio sandbox, rlimit / bare python -c:",
        "RESULT: one graded code answer costs",
    ):
        assert line in out.stdout
    assert ("ratio sandbox, bwrap / bare" in out.stdout) != ("bwrap: not available" in out.stdout)
    landlock_ran = "ratio sandbox, landlock / bare" in out.stdout
    assert landlock_ran != ("landlock: not available" in out.stdout)
