"""Escape attempts against the code sandbox, in every mode this machine offers (issue 23, item 2),
and the verdict channel the learner's code cannot write (item 6).

Each isolating mode (bubblewrap; Landlock + seccomp + the reaping supervisor) is forced in turn,
with the child's audit hook switched off: what it shows is that the mechanism holds on its own,
against code that walks around a Python hook (``_posixsubprocess``, raw sockets, ``/proc``,
ctypes). A mode this machine cannot offer is skipped with the reason. Without any isolation
nothing model-written runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.interaction.audit import AuditLog
from deeptutor_jupyter.interaction.pending import PendingCalls
from deeptutor_jupyter.interaction.quiz import QuizCoordinator
from deeptutor_jupyter.learning import sandbox as sandbox_module
from deeptutor_jupyter.learning.quiz import CodeQuestion
from deeptutor_jupyter.learning.sandbox import (
    Sandbox,
    bwrap_works,
    grade_code,
    landlock_problem,
    sandbox_status,
)
from deeptutor_jupyter.store.db import Store
from deeptutor_jupyter.store.learning import LearningStore
from tests.learning.test_quiz_coordinator import RIGHT, right_grader, start

KEY = "sk-planted-7f3a9c1e5b"
SQUARE = "def f(x):\n    return x * x\n"
MARK = "987.6543"  # the argument of every process the hostile tests start


def needs(mode: str) -> None:
    if mode == "bwrap" and not bwrap_works():
        pytest.skip("bubblewrap cannot create namespaces on this machine")
    if mode == "landlock" and (problem := landlock_problem()):
        pytest.skip(f"Landlock cannot confine here: {problem}")


ISOLATING = ["bwrap", "landlock"]


def survivors() -> list[int]:
    """Live processes (anywhere on the machine) that the hostile tests started."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if MARK.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


@pytest.fixture(autouse=True)
def _no_sleeper_outlives_a_failed_test():
    """A test that finds survivors fails; these would otherwise run on for 16 minutes."""
    yield
    for pid in survivors():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


HOSTILE = """
import ctypes, json, os, resource, socket, sqlite3, subprocess
OUT = {out!r}
got = {{}}
def attempt(name, action):
    try:
        got[name] = repr(action())[:400]
    except BaseException as exc:
        got[name] = "refused: " + type(exc).__name__
def environ_of_all():
    return [open(f"/proc/{{p}}/environ", "rb").read() for p in os.listdir("/proc") if p.isdigit()]
def spawn():
    for _ in range(298):  # new sessions: out of the child's process group
        subprocess.Popen(["/usr/bin/sleep", "{mark}"], start_new_session=True)
    if os.fork() == 0:  # and a double fork, reparented away from the child
        os.setsid()
        if os.fork() == 0:
            os.execv("/usr/bin/sleep", ["sleep", "{mark}"])
        os._exit(0)
    return "spawned"
attempt("spawn", spawn)
attempt("kernel_environ", lambda: open("/proc/{kernel}/environ", "rb").read())
attempt("all_environ", environ_of_all)
attempt("own_environ", lambda: dict(os.environ))
attempt("shadow", lambda: open("/etc/shadow").read())
attempt("state_db_read", lambda: open(OUT + "/state.db", "rb").read())
def chdir_write():
    os.chdir(OUT)
    open("chdir.txt", "w").write("x")
attempt("chdir", chdir_write)
attempt("dir_fd", lambda: os.open("dirfd.txt", os.O_CREAT | os.O_WRONLY,
                                  dir_fd=os.open(OUT, os.O_RDONLY)))
attempt("sqlite", lambda: sqlite3.connect(OUT + "/state.db").execute("create table evil(x)"))
attempt("mkfifo", lambda: os.mkfifo(OUT + "/fifo"))
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2))
def udp():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {udp}))
attempt("udp", udp)
def unix():
    s = socket.socket(socket.AF_UNIX)
    s.connect({unix!r})
attempt("unix", unix)
attempt("signal", lambda: os.kill({kernel}, 0))
attempt("parent", lambda: os.kill(os.getppid(), 0))  # Landlock: the supervisor that reaps
attempt("prlimit", lambda: resource.prlimit({kernel}, resource.RLIMIT_NOFILE))
attempt("renice_user", lambda: os.setpriority(os.PRIO_USER, 0, 1))  # every process of the user
class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
def vm_read():
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(64)
    local, remote = IoVec(ctypes.addressof(buf), 64), IoVec({address}, 64)
    if libc.process_vm_readv({kernel}, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) < 0:
        raise OSError(ctypes.get_errno(), "process_vm_readv")
    return buf.raw
attempt("vm_read", vm_read)
def via_symlink():
    os.symlink(OUT + "/state.db", "link.db")
    return open("link.db", "rb").read()
attempt("symlink", via_symlink)
attempt("hardlink", lambda: os.link(OUT + "/state.db", "hard.db"))
attempt("capability", lambda: os.nice(-1))  # CAP_SYS_NICE, had the kernel root's
attempt("chown", lambda: os.chown(".", 4321, 4321))
attempt("chmod", lambda: os.chmod(OUT + "/state.db", 0o666))  # metadata: not Landlock's
attempt("utime", lambda: os.utime(OUT + "/state.db", (0, 0)))
attempt("xattr", lambda: os.setxattr(OUT + "/state.db", "user.x", b"1"))
def user_namespace():  # clone, not unshare: the raw call (x86_64 56, aarch64 220), like fork
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    number = 220 if os.uname().machine == "aarch64" else 56
    pid = libc.syscall(number, 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER, SIGCHLD
    if pid == 0:
        os._exit(0)
    if pid < 0:
        raise OSError(ctypes.get_errno(), "clone")
    os.waitpid(pid, 0)
    return "new user namespace"
attempt("userns", user_namespace)
print(json.dumps(got))
"""


@pytest.mark.parametrize("mode", ISOLATING)
def test_every_escape_is_held_without_the_audit_hook(mode, tmp_path, monkeypatch):
    needs(mode)
    monkeypatch.setenv(
        "DEEPTUTOR_API_KEY", KEY
    )  # in the environment of this (the kernel's) process
    secret = KEY.encode() * 4  # and in its memory, at a known address
    out = tmp_path / "learner"
    out.mkdir()
    db = out / "state.db"
    sqlite3.connect(db).execute("create table answers(x)").connection.commit()
    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    before = db.read_bytes()
    db.chmod(0o600)
    stat_before = db.stat()
    # AF_UNIX paths are short (108 bytes): the listener's socket lives in a folder of its own.
    with tempfile.TemporaryDirectory(dir=out) as sockets, socket.socket() as server:
        unix_path = os.path.join(sockets, "s")
        with (
            socket.socket(socket.AF_UNIX) as unix,
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
        ):
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            unix.bind(unix_path)
            unix.listen(1)
            udp.bind(("127.0.0.1", 0))
            tests = HOSTILE.format(
                out=str(out),
                kernel=os.getpid(),
                port=server.getsockname()[1],
                udp=udp.getsockname()[1],
                unix=unix_path,
                address=id(secret) + 32,  # past the bytes object's header: its data
                mark=MARK,
            )
            outcome = Sandbox(mode=mode, audit_hook=False).run_sync("", tests, 10)
            assert survivors() == []  # the 300 sleepers died with the sandbox
            for listener in (server, unix, udp):
                listener.settimeout(0.2)
            with pytest.raises(TimeoutError):
                server.accept()  # nothing ever connected
            with pytest.raises(TimeoutError):
                unix.accept()
            with pytest.raises(TimeoutError):
                udp.recv(16)
    assert outcome.status == "passed", outcome
    got = json.loads(outcome.output)
    assert got["spawn"] == "'spawned'"  # it could start them (the hook is off) ...
    assert KEY not in outcome.output and KEY[::-1] not in outcome.output
    refused = ["kernel_environ", "shadow", "state_db_read", "chdir", "dir_fd", "sqlite", "mkfifo"]
    refused += ["tcp", "unix", "signal", "prlimit", "vm_read", "symlink", "hardlink", "capability"]
    refused += ["chown", "chmod", "utime", "xattr"]
    for name in [*refused, "userns"]:  # bwrap: --disable-userns (bubblewrap 0.8, as installed)
        assert got[name].startswith("refused:"), (name, got[name])
    if mode == "landlock":  # bwrap's own loopback may take a datagram, its own pids a nice value
        for name in ("udp", "renice_user", "parent", "userns"):
            assert got[name].startswith("refused:"), (name, got[name])
    assert "DEEPTUTOR_API_KEY" not in got["all_environ"] + got["own_environ"]
    assert sorted(p.name for p in out.iterdir()) == ["state.db"] and db.read_bytes() == before
    assert (db.stat().st_mode, db.stat().st_mtime_ns) == (
        stat_before.st_mode,
        stat_before.st_mtime_ns,
    )
    assert os.listxattr(db) == [] and os.getpriority(os.PRIO_PROCESS, 0) == niceness


CAPLESS = """
import json, os
from deeptutor_jupyter.learning.sandbox import Sandbox
sandbox = Sandbox(mode="landlock", audit_hook=False)
square = sandbox.run_sync("def f(x):\\n    return x * x\\n", "assert f(3) == 9", 5)
renice = sandbox.run_sync("", "import os\\nos.setpriority(os.PRIO_USER, 0, 5)", 5)
niceness = os.getpriority(os.PRIO_PROCESS, 0)
print(json.dumps([square.status, renice.status, renice.message, niceness]))
"""


def test_landlock_holds_for_a_kernel_without_capabilities():
    # The usual container: the kernel has no capabilities, so none of the kernel's own protects
    # it from a process of its user (renicing every process of the user: only seccomp stops it).
    needs("landlock")
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root to start a kernel without capabilities (setpriv)")
    drop = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--"]
    run = subprocess.run(
        [*drop, sys.executable, "-c", CAPLESS],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    square, renice, message, niceness = json.loads(run.stdout)
    assert (square, renice, niceness) == ("passed", "error", 0), run.stdout
    assert "PermissionError" in message


@pytest.mark.parametrize("mode", ISOLATING)
@pytest.mark.parametrize("stall", ["while True:\n    pass", "import time\ntime.sleep(60)"])
def test_no_process_survives_a_timeout(mode, stall):
    # A busy loop ends by the CPU limit, a sleep by the wall-clock kill: two ways to end.
    needs(mode)
    tests = (
        "import subprocess\n"
        "for _ in range(5):\n"
        f"    subprocess.Popen(['/usr/bin/sleep', '{MARK}'], start_new_session=True)\n"
        f"{stall}\n"
    )
    outcome = Sandbox(mode=mode, audit_hook=False).run_sync("", tests, 1)
    assert outcome.status == "timeout" and survivors() == []


@pytest.mark.parametrize("mode", ISOLATING)
def test_the_kernel_environment_and_pids_are_not_visible(mode, monkeypatch):
    needs(mode)
    monkeypatch.setenv("DEEPTUTOR_API_KEY", KEY)
    tests = (
        "import os\n"
        "try:\n"
        "    pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "except PermissionError:  # Landlock: no /proc at all\n"
        "    pids = ['refused']\n"
        f"assert str({os.getpid()}) not in pids, pids\n"
        "assert len(pids) <= 3, pids  # bwrap's init, this child, maybe a thread\n"
        "assert sorted(os.environ) <= ['HOME', 'PWD', 'TMPDIR'], sorted(os.environ)\n"
        "print(pids)\n"
    )
    outcome = Sandbox(mode=mode).run_sync("", tests, 5)
    assert outcome.status == "passed", outcome
    assert (outcome.output == "['refused']\n") == (mode == "landlock")


@pytest.fixture
def no_isolation(monkeypatch):
    monkeypatch.setattr(sandbox_module, "bwrap_works", lambda python=None: False)
    monkeypatch.setattr(
        sandbox_module, "landlock_problem", lambda python=None: "Landlock ABI 0 here, 6 needed"
    )


def test_without_bwrap_model_written_tests_are_not_run(no_isolation, tmp_path):
    witness = tmp_path / "ran.txt"
    sandbox = Sandbox(mode="bwrap")
    assert sandbox.isolation == "none"
    outcome = sandbox.run_sync(SQUARE, f"open({str(witness)!r}, 'w').write('ran')", 5)
    assert outcome.status == "not_run" and not witness.exists()
    assert "bubblewrap" in outcome.message and "apt-get install bubblewrap" in outcome.message
    assert 'sandbox = "unsafe"' in outcome.message


def test_without_any_isolation_auto_runs_nothing_and_says_why(no_isolation, tmp_path):
    witness = tmp_path / "ran.txt"
    sandbox = Sandbox(mode="auto")
    outcome = sandbox.run_sync(SQUARE, f"open({str(witness)!r}, 'w').write('ran')", 5)
    assert sandbox.isolation == "none" and outcome.status == "not_run" and not witness.exists()
    assert "neither bubblewrap" in outcome.message and "Landlock ABI 0 here" in outcome.message
    assert "Linux 6.12" in outcome.message and "libseccomp2" in outcome.message
    assert "Landlock ABI 0 here" in Sandbox(mode="landlock").reason


def test_auto_falls_back_to_landlock_where_bwrap_cannot_run(monkeypatch):
    needs("landlock")
    monkeypatch.setattr(sandbox_module, "bwrap_works", lambda python=None: False)
    sandbox = Sandbox(mode="auto")
    assert sandbox.isolation == "landlock"
    assert sandbox.run_sync(SQUARE, "assert f(3) == 9", 5).isolation == "landlock"
    assert "Landlock and seccomp (chosen automatically" in sandbox_status("auto")
    assert Sandbox(mode="bwrap").isolation == "none"  # a forced mode never falls back


def test_a_landlock_without_signal_scoping_or_blocked_is_not_used(monkeypatch):
    # ABI 6 brings the scopes that keep a same-user child from signalling the kernel.
    from deeptutor_jupyter.learning import sandbox_confine

    for abi, words in ((5, "Landlock ABI 5 here, 6 needed"), (0, "a seccomp profile blocks")):
        monkeypatch.setattr(sandbox_confine, "landlock_abi", lambda abi=abi: abi)
        monkeypatch.setattr(sandbox_module, "_landlock_cache", {})
        sandbox = Sandbox(mode="landlock")
        assert sandbox.isolation == "none" and words in sandbox.reason


async def test_a_code_answer_that_is_not_run_is_not_graded(no_isolation):
    q = CodeQuestion(id="q4", kind="code", prompt="square", tests="assert f(2) == 4", timeout_s=5)
    result = await grade_code(q, SQUARE, Sandbox(mode="auto"))
    assert result.graded_by == "none" and not result.correct
    assert result.feedback.startswith("Code answers are not run on this machine")


async def test_refuse_mode_never_runs_code(tmp_path):
    witness = tmp_path / "ran.txt"
    sandbox = Sandbox(mode="refuse")
    outcome = sandbox.run_sync("", f"open({str(witness)!r}, 'w').write('ran')", 5)
    assert outcome.status == "not_run" and '"refuse"' in outcome.message
    assert not witness.exists()


async def test_an_ungraded_code_answer_gives_no_mastery_evidence(no_isolation, tmp_path):
    learning = LearningStore(tmp_path / "state.db")
    store = Store(tmp_path / "state.db")
    try:
        audit = AuditLog(tmp_path / "audit" / "quizzes.jsonl")
        calls = PendingCalls(store)
        coordinator = QuizCoordinator(learning, calls, audit, sandbox=Sandbox(mode="bwrap"))
        task, emitted = await start(coordinator, right_grader)
        result = await coordinator.submit("s-1", emitted[0][1]["id"], RIGHT, seconds=20)
        await task
        assert "not graded" in result.results[3].feedback
        assert len(learning.evidence()) == 3 and len(learning.cards()) == 3  # q1-q3 only
    finally:
        store.close()
        learning.close()


def test_config_says_whether_code_answers_run_and_why(no_isolation, monkeypatch):
    assert "apt-get install bubblewrap" in sandbox_status("bwrap")
    assert "neither bubblewrap" in sandbox_status("auto")
    assert '"refuse"' in sandbox_status("refuse")
    assert "WITHOUT isolation" in sandbox_status("unsafe")
    monkeypatch.setattr(sandbox_module, "bwrap_works", lambda python=None: True)
    assert "run in bubblewrap (no network" in sandbox_status("bwrap")
    assert "run in bubblewrap (chosen automatically" in sandbox_status("auto")


def test_the_mode_is_a_setting(monkeypatch, tmp_path):
    monkeypatch.setenv("DEEPTUTOR_HOME", str(tmp_path))
    monkeypatch.delenv("DEEPTUTOR_SANDBOX", raising=False)
    assert resolve_settings().settings.sandbox == "auto"
    assert Sandbox().mode == "auto"
    monkeypatch.setenv("DEEPTUTOR_SANDBOX", "unsafe")
    assert Sandbox().isolation == "unsafe"
    (tmp_path / "settings.toml").write_text('sandbox = "refuse"\n')
    monkeypatch.delenv("DEEPTUTOR_SANDBOX")
    assert Sandbox().isolation == "none"
    monkeypatch.setenv("DEEPTUTOR_SANDBOX", "rlimit")  # no silent meaning for a typo
    resolved = resolve_settings()
    assert resolved.settings.sandbox == "refuse" and any("sandbox" in p for p in resolved.problems)


# --- item 6: the verdict travels apart from what the learner prints ------------------------------


@pytest.fixture(params=[*ISOLATING, "unsafe"])
def sandbox(request) -> Sandbox:
    needs(request.param)
    return Sandbox(mode=request.param)


def test_printing_a_verdict_does_not_pass(sandbox):
    fake = json.dumps({"status": "passed", "message": ""})
    code = (
        "import os, sys\n"
        f"line = '\\x00DEEPTUTOR-SANDBOX-RESULT ' + {fake!r} + '\\n'\n"
        "print(line)\n"
        "os.write(1, line.encode())\n"
        "for fd in range(3, 32):  # the verdict pipe is one of these, but the nonce is unknown\n"
        "    try:\n"
        "        os.write(fd, ('0' * 32 + ' ' + line[26:]).encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    )
    outcome = sandbox.run_sync(code, "assert False, 'never reached'", 5)
    assert outcome.status == "error" and "crashed" in outcome.message


def test_megabytes_on_fd_1_do_not_fail_a_correct_answer(sandbox):
    code = SQUARE + "import os\nfor _ in range(40):\n    os.write(1, b'x' * 100_000)\n"
    outcome = sandbox.run_sync(code, "assert f(3) == 9", 5)
    assert outcome.status == "passed", outcome
