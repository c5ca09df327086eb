"""Start the sandbox's child, drain its pipes with caps, and make sure nothing of it is left.

Three pipes come back from the child: the verdict (a private fd the learner's code does not know
the tag of), stdout and stderr. They are pipes, not files, so a learner writing megabytes to fd 1
neither fills the disk nor meets RLIMIT_FSIZE (which would kill a correct answer); the first
``limit`` bytes of each are kept, the rest read and dropped.

Under bubblewrap (``--as-pid-1``) the child is the init of a new pid namespace: when it ends, the
kernel kills every process left in the namespace before the child counts as exited, and bwrap
returns only after that, so no sleeper started by the tests outlives the grading. On a timeout
the child itself is killed first (its pid comes on bwrap's ``--info-fd``); killing bwrap alone
would leave the namespace to die a moment later, after the grade.

Under Landlock (``supervised``) the child is a supervisor (learning/sandbox_confine.py) that
reaps every process below it before it exits; on a timeout it gets SIGTERM, which makes it reap
and exit, and only if it has not within ``REAP_WAIT_S`` is its group killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

REAP_WAIT_S = 5.0  # how long a killed namespace may take to be gone before bwrap is killed


@dataclass(frozen=True)
class ChildRun:
    verdict: bytes
    stdout: bytes
    stderr: bytes
    returncode: int
    timed_out: bool


@dataclass(frozen=True)
class Limits:
    verdict: int
    output: int


def run_child(
    argv_for: Callable[[int, int | None], list[str]],
    *,
    cwd: str | None,
    env: dict[str, str],
    stdin: bytes,
    wall_s: float,
    limits: Limits,
    bwrap: bool,
    supervised: bool = False,
) -> ChildRun:
    """``argv_for(verdict_fd, info_fd)`` builds the command once the fd numbers are known."""
    verdict_r, verdict_w = os.pipe()
    info_r, info_w = os.pipe() if bwrap else (-1, -1)
    passed = (verdict_w, info_w) if bwrap else (verdict_w,)
    try:
        proc = subprocess.Popen(
            argv_for(verdict_w, info_w if bwrap else None),
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=passed,
            start_new_session=True,  # one process group to kill, away from the kernel's signals
        )
    except BaseException:
        _close(verdict_r, info_r)
        raise
    finally:
        _close(*passed)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(stdin)  # a few bytes: far below a pipe's buffer, so this never blocks
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    out, err = proc.stdout.fileno(), proc.stderr.fileno()
    caps = {verdict_r: limits.verdict, out: limits.output, err: limits.output}
    try:
        timed_out, kept = _collect(proc, caps, wall_s, lambda: _kill(proc, info_r, supervised))
    finally:
        _kill_group(proc)  # what the child left in its group (bwrap: its namespace is gone)
        _close(verdict_r, info_r)
        proc.stdout.close()
        proc.stderr.close()
    return ChildRun(kept[verdict_r], kept[out], kept[err], proc.wait(), timed_out)


def _collect(
    proc: subprocess.Popen[bytes], caps: dict[int, int], wall_s: float, kill: Callable[[], None]
) -> tuple[bool, dict[int, bytes]]:
    """Drain the pipes until the child has ended (or is killed at ``wall_s``).

    The child's exit is watched through a pidfd, so a grandchild that keeps a pipe open
    (possible only without bubblewrap) cannot hold the grading past the child.
    """
    kept = {fd: bytearray() for fd in caps}
    deadline = time.monotonic() + wall_s
    timed_out = False
    with selectors.DefaultSelector() as sel:
        for fd in caps:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        pidfd = _pidfd(proc.pid)
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ)
        try:
            while proc.poll() is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    kill()
                    proc.wait()
                    break
                wait = left if pidfd is not None else min(left, 0.05)
                for key, _ in sel.select(wait):
                    if key.fd != pidfd and _read_into(key.fd, kept[key.fd], caps[key.fd]) < 0:
                        sel.unregister(key.fd)
        finally:
            _close(pidfd if pidfd is not None else -1)
    for fd in caps:  # what is left in the pipes after the end
        while _read_into(fd, kept[fd], caps[fd]) > 0:
            pass
    return timed_out, {fd: bytes(data) for fd, data in kept.items()}


def _read_into(fd: int, into: bytearray, limit: int) -> int:
    """One read: the bytes read, 0 when nothing is there now, -1 at end of file."""
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        return 0
    if not chunk:
        return -1
    into += chunk[: max(0, limit - len(into))]
    return len(chunk)


def _kill(proc: subprocess.Popen[bytes], info_r: int, supervised: bool) -> None:
    """Kill the namespace's init and let bwrap return once it is gone, or let the supervisor reap
    and exit; else kill the group.

    The init is bwrap's child and bwrap has not been reaped, so that pid is still the init's.
    """
    init = _init_pid(info_r) if info_r >= 0 else None
    pid, signum = (proc.pid, signal.SIGTERM) if supervised else (init, signal.SIGKILL)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(REAP_WAIT_S)
            return
    _kill_group(proc)


def _init_pid(info_r: int) -> int | None:
    """bwrap writes ``{"child-pid": N}`` on --info-fd as soon as the namespace's init exists."""
    os.set_blocking(info_r, False)
    try:
        data = os.read(info_r, 4096)
        return int(json.loads(data)["child-pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux >= 5.3, or a seccomp filter: poll instead
        return None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
