"""Run a learner's code against a model's tests, away from the learner's files, network and kernel.

The tests of a ``code`` question are written by a model, so they are untrusted: they run in a
child process, never in the notebook's kernel. Each run gets a fresh temporary folder as its
working directory and HOME, an empty environment, and the limits that learning/sandbox_child.py
sets on itself (CPU, memory, open files, file size, no core dump) plus a wall-clock timeout here.

Where bubblewrap (``bwrap``, Debian package ``bubblewrap``) works, the child also runs in new
namespaces (``--unshare-all``: no network, its own pids) with only the Python install and system
libraries mounted read-only, so files outside the folder are not even visible. Without it, an
audit hook inside the child refuses sockets, processes and writes outside the folder; that is a
fence against accidents and careless tests, not against a determined attacker (docs/learning.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from deeptutor_jupyter.learning.quiz import CodeQuestion, QuestionResult

Status = Literal["passed", "failed", "error", "timeout", "memory"]
Isolation = Literal["bwrap", "rlimit"]

MEMORY_MB = 256
FILE_BYTES = 1 << 20
STARTUP_GRACE_S = 3.0  # the interpreter's start is not the learner's time
MARKER = "\x00DEEPTUTOR-SANDBOX-RESULT "
CHILD = Path(__file__).with_name("sandbox_child.py")
OUTPUT_LIMIT = 64_000


@dataclass(frozen=True)
class Outcome:
    status: Status
    message: str = ""
    line: int | None = None
    file: str | None = None
    source: str = ""  # the text of that line
    output: str = ""  # what the code printed (capped)
    isolation: Isolation = "rlimit"
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass
class Sandbox:
    """``isolation=None`` picks bubblewrap when it works here, else the rlimit child."""

    memory_mb: int = MEMORY_MB
    isolation: Isolation | None = None
    python: str = field(default_factory=lambda: sandbox_python())

    def __post_init__(self) -> None:
        if self.isolation is None:
            forced = os.environ.get("DEEPTUTOR_SANDBOX", "")
            if forced in ("bwrap", "rlimit"):
                self.isolation = forced  # type: ignore[assignment]
            else:
                self.isolation = "bwrap" if bwrap_works(self.python) else "rlimit"

    async def run(self, code: str, tests: str, timeout_s: float = 5.0) -> Outcome:
        """Off the event loop: the kernel stays responsive while the child runs."""
        return await asyncio.to_thread(self.run_sync, code, tests, timeout_s)

    def run_sync(self, code: str, tests: str, timeout_s: float = 5.0) -> Outcome:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="deeptutor-sandbox-") as base:
            work = Path(base) / "work"
            work.mkdir()
            (work / "solution.py").write_text(code, encoding="utf-8")
            (work / "tests.py").write_text(tests, encoding="utf-8")
            (work / "runner.py").write_text(CHILD.read_text(encoding="utf-8"), encoding="utf-8")
            config = {
                "cpu_seconds": max(1, math.ceil(timeout_s)),
                "memory_bytes": self.memory_mb << 20,
                "file_bytes": FILE_BYTES,
            }
            (work / "config.json").write_text(json.dumps(config), encoding="utf-8")
            out_path, err_path = Path(base) / "stdout", Path(base) / "stderr"
            with out_path.open("wb") as out, err_path.open("wb") as err:
                timed_out, code_ = self._spawn(work, out, err, timeout_s + STARTUP_GRACE_S)
            stdout = _tail(out_path)
            stderr = _tail(err_path)
        outcome = _read_outcome(stdout, stderr, code_, timed_out, timeout_s)
        return Outcome(
            **{**outcome.__dict__, "isolation": self.isolation, "seconds": _since(started)}
        )

    def _spawn(self, work: Path, out: IO[bytes], err: IO[bytes], wall_s: float) -> tuple[bool, int]:
        argv = [self.python, "-I", "-S", "-B", "runner.py"]
        if self.isolation == "bwrap":
            argv = bwrap_argv(self.python, work) + argv
            cwd, env = None, {}
        else:
            cwd, env = str(work), {"HOME": str(work), "TMPDIR": str(work)}
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,  # one process group to kill, away from the kernel's signals
        )
        # A timer kills the group; a blocking wait() returns at once when the child ends
        # (wait(timeout=...) polls with sleeps of up to 50 ms, which was most of the cost).
        fired = threading.Event()

        def kill() -> None:
            fired.set()
            _kill_group(proc)

        timer = threading.Timer(wall_s, kill)
        timer.start()
        try:
            returncode = proc.wait()
        finally:
            timer.cancel()
        return fired.is_set(), returncode


def sandbox_python() -> str:
    """The base interpreter (not the venv's): the child runs with ``-I -S``, stdlib only."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidate = Path(sys.base_prefix) / "bin" / version
    if candidate.exists():
        return str(candidate)
    return os.path.realpath(sys.executable)


def _system_mounts(python: str) -> list[str]:
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    for path in ("/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        args += ["--ro-bind-try", path, path]
    prefix = Path(sys.base_prefix).resolve()
    roots = {prefix, Path(python).resolve().parent.parent}
    for root in sorted(roots):
        if root != Path("/usr") and Path("/usr") not in root.parents:
            args += ["--ro-bind", str(root), str(root)]
    return args


def bwrap_argv(python: str, work: Path) -> list[str]:
    bwrap = shutil.which("bwrap") or "bwrap"
    return [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        *_system_mounts(python),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--bind",
        str(work),
        "/sandbox",
        "--chdir",
        "/sandbox",
        "--clearenv",
        "--setenv",
        "HOME",
        "/sandbox",
        "--setenv",
        "TMPDIR",
        "/sandbox",
        "--",
    ]


_bwrap_cache: dict[str, bool] = {}


def bwrap_works(python: str | None = None) -> bool:
    """bwrap is installed and may create namespaces here (containers often forbid it)."""
    python = python or sandbox_python()
    if python in _bwrap_cache:
        return _bwrap_cache[python]
    ok = False
    if shutil.which("bwrap"):
        with tempfile.TemporaryDirectory() as work:
            argv = [*bwrap_argv(python, Path(work)), python, "-I", "-S", "-c", "pass"]
            try:
                ok = (
                    subprocess.run(argv, capture_output=True, timeout=20, check=False).returncode
                    == 0
                )
            except (OSError, subprocess.TimeoutExpired):
                ok = False
    _bwrap_cache[python] = ok
    return ok


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _tail(path: Path) -> str:
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - OUTPUT_LIMIT))
        return f.read().decode("utf-8", errors="replace")


def _since(started: float) -> float:
    return round(time.monotonic() - started, 4)


_CPU_SIGNALS = {signal.SIGXCPU, signal.SIGKILL}


def _read_outcome(
    stdout: str, stderr: str, returncode: int, timed_out: bool, timeout_s: float
) -> Outcome:
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            data = json.loads(line[len(MARKER) :])
            return Outcome(
                status=data["status"],
                message=str(data.get("message", "")),
                line=data.get("line"),
                file=data.get("file"),
                source=str(data.get("source", "")),
                output=str(data.get("output", "")),
            )
    if timed_out or _signal_of(returncode) in _CPU_SIGNALS:
        return Outcome("timeout", f"the code did not finish within {timeout_s:g} s")
    if "MemoryError" in stderr:
        return Outcome("memory", "the code ran out of memory")
    last = stderr.strip().splitlines()[-1:] or [f"exit status {returncode}"]
    return Outcome("error", f"the code crashed: {last[0][:300]}")


def _signal_of(returncode: int) -> int | None:
    if returncode < 0:
        return -returncode
    if returncode > 128:  # bwrap reports a child killed by a signal as 128 + signal
        return returncode - 128
    return None


def feedback_of(outcome: Outcome, timeout_s: float) -> str:
    where = f" (line {outcome.line} of the {_file_words(outcome.file)}: `{outcome.source}`)"
    if outcome.line is None or not outcome.source:
        where = ""
    if outcome.status == "passed":
        return "All tests passed."
    if outcome.status == "failed":
        detail = f": {outcome.message}" if outcome.message else ""
        return f"A test failed{where}{detail}."
    if outcome.status == "timeout":
        return f"The tests did not finish within {timeout_s:g} s (an endless loop?)."
    if outcome.status == "memory":
        return "The code ran out of memory."
    return f"The code raised an error{where}: {outcome.message}"


def _file_words(name: str | None) -> str:
    return "tests" if name == "tests.py" else "your code"


async def grade_code(q: CodeQuestion, given: str, sandbox: Sandbox) -> QuestionResult:
    if not given.strip():
        return QuestionResult(
            id=q.id,
            correct=False,
            given=given,
            score=0.0,
            feedback="No code was given.",
            graded_by="tests",
        )
    outcome = await sandbox.run(given, q.tests, q.timeout_s)
    words = feedback_of(outcome, q.timeout_s)
    if q.explanation:
        words += f" {q.explanation}"
    return QuestionResult(
        id=q.id,
        correct=outcome.passed,
        given=given,
        score=1.0 if outcome.passed else 0.0,
        feedback=words,
        graded_by="tests",
    )
