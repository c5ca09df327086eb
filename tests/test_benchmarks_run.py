"""The benchmark scripts still run and print their labelled lines. No timing is asserted here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def run(script: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        cwd=str(BENCHMARKS.parent),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, f"{script} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.mark.parametrize(
    "line",
    [
        "load_ext benchmark:",
        "[shell] fresh InteractiveShell",
        "[kernel] fresh InteractiveShell after `import ipykernel.ipkernel`",
        "reference: import IPython shell",
        "reference: import ipykernel",
        "reference: InteractiveShell()",
        "%load_ext deeptutor_jupyter",
        "goal < 150 ms:",
        "heavy modules: httpx=",
        "modules added by load_ext:",
        "RESULT:",
    ],
)
def test_load_ext_quick(line: str, load_ext_output: str) -> None:
    assert line in load_ext_output


@pytest.fixture(scope="module")
def load_ext_output() -> str:
    return run("load_ext.py", "--quick")


@pytest.fixture(scope="module")
def turn_output() -> str:
    return run("turn_overhead.py", "--quick")


@pytest.mark.parametrize(
    "line",
    [
        "turn overhead benchmark:",
        "no widgets",
        "bare httpx, 1 request",
        "turn, 1 round ",
        "bare httpx, 2 requests",
        "turn, 2 rounds (calculate)",
        "turn, 1 round, store=None",
        "bare httpx, 1 req, new conn",
        "ratio turn/bare, 1 round:",
        "ratio turn/bare, 2 rounds:",
        "overhead per round, 1-round turn:",
        "overhead per round, 2-round turn:",
        "SQLite store share, 1 round:",
        "RESULT:",
    ],
)
def test_turn_overhead_quick(line: str, turn_output: str) -> None:
    assert line in turn_output


def test_load_ext_keeps_heavy_modules_out(load_ext_output: str) -> None:
    # A module list, not a timing: load_ext must not pull in the HTTP stack, models or widgets.
    assert "IMPORTED by load_ext" not in load_ext_output


@pytest.mark.e2e
def test_inspect_responsiveness_quick() -> None:
    out = run("inspect_responsiveness.py", "--quick")
    for line in ("trivial cell, kernel idle:", "ratio busy/idle:", "Stop -> turn shows", "RESULT:"):
        assert line in out


def test_event_rows_quick() -> None:
    out = run("event_rows.py", "--quick")
    for line in ("anchor: the answer itself", "answers: state.db +", "replay exact", "RESULT:"):
        assert line in out


@pytest.mark.e2e
def test_streaming_bytes_quick() -> None:
    out = run("streaming_bytes.py", "--quick")
    for line in ("all iopub", "final display update:", "goal < 3.0x all messages", "RESULT:"):
        assert line in out


@pytest.mark.e2e
def test_kernel_turns_quick() -> None:
    out = run("kernel_turns.py", "--quick")
    for line in (
        "anchor after the warm-up turn",
        "widgets per finished turn",
        "RSS per finished turn",
    ):
        assert line in out


@pytest.mark.e2e
def test_first_turn_quick() -> None:
    out = run("first_turn.py", "--quick")
    for line in (
        "first %tutor:",
        "first %tutor, sent at once after %load_ext:",
        "first %tutor, warming off:",
        "second %tutor:",
        "RESULT:",
    ):
        assert line in out
    # Whether warming was done within the 1 s depends on the machine's load: what the turn
    # imports after warming is asserted in tests/e2e/test_warm_kernel.py, after warm.wait().
    assert "heavy packages the first turn imported (typed):" in out
