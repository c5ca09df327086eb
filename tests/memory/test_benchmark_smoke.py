"""benchmarks/memory.py still runs and prints its labelled lines. No timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "memory.py"


@pytest.fixture(scope="module")
def output() -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        cwd=str(SCRIPT.parent.parent),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.parametrize(
    "line",
    [
        "memory benchmark:",
        "L1 append, emit (no fsync), 200 records:",
        "L1 append, emit (fsync)",
        "L1 append, emit_many (no fsync)",
        "records/s",
        "L3 profile.md: 500 entries",
        "L3 read (parse), 500 entries: median",
        "L3 parse only (no cache), 500 entries: median",
        "L1 append, 200 emits with 0 traces already:",
        "L1 append, 200 emits with 2000 traces already:",
        "L1 append ratio, 2000 vs 0 traces:",
        "merge, 500 entries:",
        "L3 read_l3_concat",
        "L3 system_prompt_block",
        "RESULT:",
    ],
)
def test_memory_benchmark_quick(line: str, output: str) -> None:
    assert line in output
