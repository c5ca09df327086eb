"""Processes that take the course service's place: on its old port, or on a socket of their own.

A student's process on a one-machine hub can bind the service's loopback port while the service
restarts, or put a Unix socket wherever it may write. These record what reaches them.
"""

from __future__ import annotations

import os
import queue
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

NOBODY = 65534
# Runs as nobody under the system's Python (the test's venv may sit in root's home).
UNIX_SQUATTER = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
print("listening", flush=True)
while True:
    conn, _ = s.accept()
    print("connected", flush=True)
    conn.settimeout(10)
    got = 0
    try:
        while chunk := conn.recv(65536):
            got += len(chunk)
    except OSError:
        pass
    print(f"received {got} bytes", flush=True)
"""


class PortSquatter:
    """A loopback port that accepts connections and counts them (in this process)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


class SocketSquatter:
    """A Unix socket bound by a process running as nobody, in a folder nobody owns; ``said``
    gives what it reported, line by line (a connection, then the bytes it received)."""

    def __init__(self) -> None:
        if os.geteuid() != 0:
            pytest.skip("binding a socket as another user needs root (CI runs as root)")
        python = shutil.which("python3", path="/usr/bin:/bin")
        if python is None:
            pytest.skip("no system python3 to run the other user's process")
        self.folder = Path(tempfile.mkdtemp(prefix="dt-squat-"))
        os.chown(self.folder, NOBODY, NOBODY)
        self.path = str(self.folder / "deeptutor.sock")
        self.proc = subprocess.Popen(
            [python, "-c", UNIX_SQUATTER, self.path],
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        assert self.said() == "listening"

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def said(self, timeout: float = 20) -> str:
        return self.lines.get(timeout=timeout)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.reader.join(timeout=10)  # it reads to the end of the dead process's output
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextmanager
def socket_of_another_user() -> Iterator[SocketSquatter]:
    squatter = SocketSquatter()
    try:
        yield squatter
    finally:
        squatter.close()
