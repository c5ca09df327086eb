"""Run a learner's code against a model's tests, away from the learner's files, network and kernel.

The tests of a ``code`` question are written by a model, so they are untrusted: they run in a
child process, never in the notebook's kernel, and only where that child can be isolated. The
``sandbox`` setting decides (docs/learning.md#the-code-sandbox):

* ``"auto"`` (default): bubblewrap where it can run, else Landlock, else code answers are **not
  run** and the result says why and how to enable it: never a silent fallback to no isolation.
* ``"bwrap"``: bubblewrap (Debian package ``bubblewrap``) runs the child in new namespaces (no
  network, its own pids, so nothing of the kernel's ``/proc`` is there) with only the Python
  install and system libraries mounted read-only, an empty environment and a fresh folder as the
  only writable place; when the child ends, its pid namespace dies with every process it
  started. Bubblewrap needs user namespaces, which Docker and Kubernetes often forbid.
* ``"landlock"``: for those: Landlock and seccomp confine the child to the same contract, and a
  supervisor reaps every process it started (learning/sandbox_confine.py).
* ``"refuse"``: never run them.
* ``"unsafe"``: the child runs with resource limits and an audit hook only. The hook stops
  careless tests, not a determined one (native code, ``_posixsubprocess``, ``/proc``): for a
  single-user laptop where the learner accepts that.

The child limits itself (learning/sandbox_child.py: CPU, memory, open files, file size); a
wall-clock timeout here kills it. Its verdict comes back on a private pipe with a nonce it read
from stdin, so nothing the learner's code prints can pass for it; what it prints is drained
through pipes and capped without touching the verdict.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from deeptutor_jupyter.config import SandboxMode
from deeptutor_jupyter.learning.quiz import CodeQuestion, QuestionResult
from deeptutor_jupyter.learning.sandbox_proc import ChildRun, Limits, run_child

Status = Literal["passed", "failed", "error", "timeout", "memory", "not_run"]
Isolation = Literal["bwrap", "landlock", "unsafe", "none"]

MEMORY_MB = 256
FILE_BYTES = 1 << 20
STARTUP_GRACE_S = 3.0  # the interpreter's start is not the learner's time
CHILD = Path(__file__).with_name("sandbox_child.py")
CONFINE = Path(__file__).with_name("sandbox_confine.py")
OUTPUT_LIMIT = 64_000  # bytes kept of each of the child's stdout and stderr
VERDICT_LIMIT = 1 << 20

NOT_RUN = "Code answers are not run on this machine, so this one was not graded: the tests are "
NO_BWRAP = (
    "written by a model and need an isolated sandbox, and bubblewrap (`bwrap`) is missing or may "
    "not create namespaces here (common in Docker and Kubernetes). "
)
NO_LANDLOCK = (
    "written by a model and need an isolated sandbox, and Landlock cannot be used here ({}). "
)
NO_EITHER = (
    "written by a model and need an isolated sandbox, and neither bubblewrap (`bwrap`: missing, "
    "or no user namespaces, common in Docker and Kubernetes) nor Landlock ({}) can be used here. "
)
TO_ENABLE_BWRAP = (
    "To enable grading, install bubblewrap (`apt-get install bubblewrap`) where unprivileged user "
    "namespaces are allowed (in a container: run it with them allowed)"
)
TO_ENABLE_LANDLOCK = (
    "run on Linux 6.12 or later with Landlock enabled and Debian's `libseccomp2` installed "
    "(in a container: a seccomp profile that allows the landlock_* calls)"
)
UNSAFE_HINT = (
    '. On a single-user laptop you may instead set `sandbox = "unsafe"` in settings.toml, which '
    "runs the tests without isolation."
)
NOT_RUN_REFUSED = (
    'Code answers are not run here (the `sandbox` setting is "refuse"), so this one was not graded.'
)


@dataclass(frozen=True)
class Outcome:
    status: Status
    message: str = ""
    line: int | None = None
    file: str | None = None
    source: str = ""  # the text of that line
    output: str = ""  # what the code printed (capped)
    isolation: Isolation = "none"
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def configured_mode() -> SandboxMode:
    """The ``sandbox`` setting (settings.toml, ``DEEPTUTOR_SANDBOX``)."""
    from deeptutor_jupyter.config import resolve_settings

    return resolve_settings().settings.sandbox


@dataclass
class Sandbox:
    """``mode=None`` reads the ``sandbox`` setting; ``isolation`` is what this machine gives it."""

    mode: SandboxMode | None = None
    memory_mb: int = MEMORY_MB
    python: str = field(default_factory=lambda: sandbox_python())
    # Tests switch it off to show that bubblewrap alone holds; it stays on in use.
    audit_hook: bool = True
    isolation: Isolation = field(init=False, default="none")
    reason: str = field(init=False, default="")

    def __post_init__(self) -> None:
        if self.mode is None:
            self.mode = configured_mode()
        if self.mode == "unsafe":
            self.isolation = "unsafe"
        elif self.mode in ("auto", "bwrap") and bwrap_works(self.python):
            self.isolation = "bwrap"
        elif self.mode in ("auto", "landlock") and not landlock_problem(self.python):
            self.isolation = "landlock"
        else:
            self.isolation = "none"
            self.reason = _not_run_reason(self.mode, self.python)

    async def run(self, code: str, tests: str, timeout_s: float = 5.0) -> Outcome:
        """Off the event loop: the kernel stays responsive while the child runs."""
        return await asyncio.to_thread(self.run_sync, code, tests, timeout_s)

    def run_sync(self, code: str, tests: str, timeout_s: float = 5.0) -> Outcome:
        if self.isolation == "none":
            return Outcome("not_run", self.reason)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="deeptutor-sandbox-") as base:
            work = Path(base) / "work"
            work.mkdir()
            (work / "solution.py").write_text(code, encoding="utf-8")
            (work / "tests.py").write_text(tests, encoding="utf-8")
            (work / "runner.py").write_text(CHILD.read_text(encoding="utf-8"), encoding="utf-8")
            config: dict[str, object] = {
                "cpu_seconds": max(1, math.ceil(timeout_s)),
                "memory_bytes": self.memory_mb << 20,
                "file_bytes": FILE_BYTES,
                "audit_hook": self.audit_hook,
            }
            if self.isolation == "landlock":
                (work / "confine.py").write_text(CONFINE.read_text("utf-8"), encoding="utf-8")
                config.update(landlock=True, read_roots=[str(p) for p in read_roots(self.python)])
            nonce = secrets.token_hex(16)
            run = self._spawn(work, config, nonce, timeout_s + STARTUP_GRACE_S)
        outcome = _read_outcome(run, nonce, timeout_s)
        return Outcome(
            **{**outcome.__dict__, "isolation": self.isolation, "seconds": _since(started)}
        )

    def _spawn(
        self, work: Path, config: Mapping[str, object], nonce: str, wall_s: float
    ) -> ChildRun:
        child = [self.python, "-I", "-S", "-B", "runner.py"]

        def argv_for(verdict_fd: int, info_fd: int | None) -> list[str]:
            (work / "config.json").write_text(
                json.dumps({**config, "verdict_fd": verdict_fd}), encoding="utf-8"
            )
            if self.isolation == "bwrap":
                return bwrap_argv(self.python, work, info_fd) + child
            return child

        bwrap = self.isolation == "bwrap"
        return run_child(
            argv_for,
            cwd=None if bwrap else str(work),
            env={} if bwrap else {"HOME": str(work), "TMPDIR": str(work)},
            stdin=nonce.encode() + b"\n",
            wall_s=wall_s,
            limits=Limits(verdict=VERDICT_LIMIT, output=OUTPUT_LIMIT),
            bwrap=bwrap,
            supervised=self.isolation == "landlock",
        )


def sandbox_python() -> str:
    """The base interpreter (not the venv's): the child runs with ``-I -S``, stdlib only."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidate = Path(sys.base_prefix) / "bin" / version
    if candidate.exists():
        return str(candidate)
    return os.path.realpath(sys.executable)


SYSTEM_ROOTS = ("/lib", "/lib64", "/lib32", "/bin", "/sbin")  # besides /usr; some are links


def read_roots(python: str) -> list[Path]:
    """What the child may read (and run): /usr, the system folders and the Python install."""
    roots = [Path("/usr"), *(Path(p) for p in SYSTEM_ROOTS)]
    prefix = Path(sys.base_prefix).resolve()
    for root in sorted({prefix, Path(python).resolve().parent.parent}):
        if root != Path("/usr") and Path("/usr") not in root.parents:
            roots.append(root)
    return roots


def _system_mounts(python: str) -> list[str]:
    args: list[str] = []
    for root in read_roots(python):
        bind = "--ro-bind-try" if str(root) in SYSTEM_ROOTS else "--ro-bind"
        args += [bind, str(root), str(root)]
    return args


def bwrap_argv(python: str, work: Path, info_fd: int | None = None) -> list[str]:
    bwrap = shutil.which("bwrap") or "bwrap"
    # --unshare-all includes --unshare-net (no network, not even loopback to the kernel's ports)
    # and --unshare-pid (a fresh /proc without the kernel's pids and environment). --as-pid-1:
    # the child is the namespace's init, so when it ends every process it started is killed
    # before bwrap returns (learning/sandbox_proc.py). --die-with-parent: if the kernel dies,
    # so does the sandbox.
    return [
        bwrap,
        "--unshare-all",
        *_no_nested_userns(bwrap),
        "--die-with-parent",
        "--as-pid-1",
        "--new-session",
        "--cap-drop",
        "ALL",
        *(["--info-fd", str(info_fd)] if info_fd is not None else []),
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


_userns_flags: dict[str, list[str]] = {}


def _no_nested_userns(bwrap: str) -> list[str]:
    """``--disable-userns`` where bwrap has it (0.8+): code in the sandbox cannot create a user
    namespace of its own (one where it holds every capability over new mounts and namespaces).
    It needs a user namespace of the sandbox's own, which ``--unshare-all`` only tries for."""
    if bwrap not in _userns_flags:
        try:
            usage = subprocess.run(
                [bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            usage = ""
        has = "--disable-userns" in usage
        _userns_flags[bwrap] = ["--unshare-user", "--disable-userns"] if has else []
    return _userns_flags[bwrap]


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


def isolation_available(python: str | None = None) -> bool:
    """Whether ``sandbox = "auto"`` runs code here: bubblewrap or Landlock works."""
    return bwrap_works(python) or not landlock_problem(python)


_landlock_cache: dict[str, str] = {}


def landlock_problem(python: str | None = None) -> str:
    """Why the "landlock" mode cannot run here ("" when it can): a real child is confined once."""
    python = python or sandbox_python()
    if python not in _landlock_cache:
        _landlock_cache[python] = _probe_landlock(python)
    return _landlock_cache[python]


def _probe_landlock(python: str) -> str:
    from deeptutor_jupyter.learning import sandbox_confine

    abi = sandbox_confine.landlock_abi()
    if abi == 0:
        return "Landlock is off in this kernel, or a seccomp profile blocks its calls"
    if abi < sandbox_confine.MIN_ABI:
        return f"Landlock ABI {abi} here, {sandbox_confine.MIN_ABI} needed: Linux 6.12 or later"
    try:
        sandbox_confine.libseccomp()
    except OSError:
        return "libseccomp (Debian's `libseccomp2`) is missing"
    probe = Sandbox(mode="unsafe", python=python)
    probe.isolation = "landlock"
    outcome = probe.run_sync("", "", 10)
    return "" if outcome.passed else f"a confined test run failed: {outcome.message[:200]}"


def _not_run_reason(mode: str, python: str) -> str:
    if mode == "refuse":
        return NOT_RUN_REFUSED
    if mode == "bwrap":
        return NOT_RUN + NO_BWRAP + TO_ENABLE_BWRAP + UNSAFE_HINT
    problem = landlock_problem(python)
    if mode == "landlock":
        return (
            NOT_RUN
            + NO_LANDLOCK.format(problem)
            + "To enable grading, "
            + TO_ENABLE_LANDLOCK
            + UNSAFE_HINT
        )
    return (
        NOT_RUN
        + NO_EITHER.format(problem)
        + TO_ENABLE_BWRAP
        + ", or "
        + TO_ENABLE_LANDLOCK
        + UNSAFE_HINT
    )


def _since(started: float) -> float:
    return round(time.monotonic() - started, 4)


_CPU_SIGNALS = {signal.SIGXCPU, signal.SIGKILL}


def _read_outcome(run: ChildRun, nonce: str, timeout_s: float) -> Outcome:
    """The verdict is the pipe's line that starts with the nonce; anything else is ignored."""
    tag = nonce + " "
    for line in reversed(run.verdict.decode("utf-8", errors="replace").splitlines()):
        if line.startswith(tag):
            data = json.loads(line[len(tag) :])
            return Outcome(
                status=data["status"],
                message=str(data.get("message", "")),
                line=data.get("line"),
                file=data.get("file"),
                source=str(data.get("source", "")),
                output=str(data.get("output", "")),
            )
    stderr = run.stderr.decode("utf-8", errors="replace")
    if run.timed_out or _signal_of(run.returncode) in _CPU_SIGNALS:
        return Outcome("timeout", f"the code did not finish within {timeout_s:g} s")
    if "MemoryError" in stderr:
        return Outcome("memory", "the code ran out of memory")
    last = stderr.strip().splitlines()[-1:] or [f"exit status {run.returncode}"]
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
    if outcome.status == "not_run":
        return outcome.message
    return f"The code raised an error{where}: {outcome.message}"


def _file_words(name: str | None) -> str:
    return "tests" if name == "tests.py" else "your code"


def sandbox_status(mode: SandboxMode) -> str:
    """One line for ``%tutor config``: whether code answers of quizzes are run here, and why."""
    sandbox = Sandbox(mode=mode)
    chosen = " (chosen automatically; the `sandbox` setting overrides)" if mode == "auto" else ""
    if sandbox.isolation == "bwrap":
        return (
            f"Code answers of quizzes run in bubblewrap{chosen} (no network, no access to your "
            "files)."
        )
    if sandbox.isolation == "landlock":
        return (
            f"Code answers of quizzes run under Landlock and seccomp{chosen} (no network, no "
            "access to your files or other processes; bubblewrap cannot run here)."
        )
    if sandbox.isolation == "unsafe":
        return (
            'Code answers of quizzes run WITHOUT isolation (`sandbox = "unsafe"`): the tests '
            "can read your files and keys. Only for a single-user laptop."
        )
    return sandbox.reason


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
    if outcome.status == "not_run":  # no grade: no mastery evidence, no review card
        return QuestionResult(
            id=q.id, correct=False, given=given, score=0.0, feedback=words, graded_by="none"
        )
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
