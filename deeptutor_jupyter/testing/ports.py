"""Loopback ports for test servers that cannot be handed an open socket.

Picking a port by binding to port 0 and closing it races every other process on the machine:
between the close and the server's own bind (a second or two while JupyterLab or JupyterHub
starts) a kernel's ZMQ socket, whose port jupyter_client also chose with bind-to-0, can take it.
That happened once in CI: a JupyterLab test's status request reached a kernel's iopub socket.

So ``free_port`` hands out ports *below* the kernel's ephemeral range, which no bind-to-0 ever
returns, and claims each one with a lock on that port's byte of one shared file, held for the
life of the claiming process, so two test processes (the suite runs two side by side, and
JupyterHub processes pick single-user ports with it too) never hand out the same one.
``refused_port`` holds a bound socket that never listens: connecting gets "connection refused"
for as long as the process lives, and nothing else can take the port meanwhile.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import random
import socket
import tempfile
import threading
from pathlib import Path

LOWEST = 20000
_claimed: set[int] = set()
_claim_fd: int | None = None  # one descriptor for every claim: closing any would drop them all
_held: list[socket.socket] = []
_lock = threading.Lock()


@atexit.register
def _release_held() -> None:
    while _held:
        _held.pop().close()


def _ephemeral_floor() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _claim(port: int) -> bool:
    global _claim_fd
    if _claim_fd is None:
        path = Path(tempfile.gettempdir()) / "deeptutor-test-ports.lock"
        _claim_fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.lockf(_claim_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
    except OSError:
        return False
    return True


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback TCP port no other process is using or will be handed (see the module doc)."""
    high = _ephemeral_floor()
    if high - LOWEST < 1000:
        raise RuntimeError(
            f"the ephemeral port range starts at {high}: no room below it for test servers"
        )
    with _lock:
        candidates = list(range(LOWEST, high))
        start = random.randrange(len(candidates))
        for port in candidates[start:] + candidates[:start]:
            if port in _claimed:
                continue
            _claimed.add(port)  # claimed or not, this process never tries it again
            if _claim(port) and _bindable(port):
                return port
    raise RuntimeError(f"no free loopback port between {LOWEST} and {high}")


def refused_port() -> int:
    """A loopback port bound and never listening, for the life of this process."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    _held.append(sock)
    return int(sock.getsockname()[1])


def refused_url() -> str:
    """A loopback base URL where connecting is refused (see ``refused_port``)."""
    return f"http://127.0.0.1:{refused_port()}/v1"
