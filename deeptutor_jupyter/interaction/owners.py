"""Which process owns a waiting turn, and whether it is still there.

A question is answered wherever the learner happens to be (another notebook's kernel, the sidebar's
server, the API), but its turn runs on in the process that asked it, in its own cell. That process
registers itself in ``owners`` and beats (``Heartbeat``, a thread of its own, so a long blocking
cell does not stop it) while it has turns running; an answer given elsewhere is only consumed in
SQLite and the owner notices. An owner is live only with a fresh heartbeat, on every host; on this
host its pid must also run, not as a zombie, and be the same process (its start time, so a pid
reused after a restart, as in a container or a pod whose pids start again, is not it). A process
that is gone owns nothing, and the surface that answers resumes the turn.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from deeptutor_jupyter.store.db import OwnerRow, Store

HEARTBEAT_SECONDS = 5.0
# Twelve missed beats: a network disk's slow commit is not a death, a killed kernel is one soon.
STALE_SECONDS = 60.0


@dataclass(frozen=True)
class Owner:
    id: str
    label: str  # the notebook (or surface) this process serves

    @classmethod
    def this_process(cls, label: str) -> Owner:
        return cls(f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}", label)


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first); None without it."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()  # the name, in parentheses, may hold anything


def started(pid: int) -> str | None:
    """'<boot id>:<start time in ticks>' of a process: the same pid with another start (or after
    a reboot) is another process. None where /proc does not say (not Linux, or gone)."""
    fields = _stat(pid)
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    return f"{boot}:{fields[19]}" if fields is not None and len(fields) > 19 else None


def pid_alive(pid: int) -> bool:
    """The process runs; a zombie (killed, not yet reaped) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        pass
    fields = _stat(pid)
    return fields is None or fields[0] not in ("Z", "X")


def is_live(row: OwnerRow, now: float | None = None) -> bool:
    now = time.time() if now is None else now
    if now - row.heartbeat > STALE_SECONDS:
        return False
    if row.host != socket.gethostname():
        return True
    if not pid_alive(row.pid):
        return False
    return row.started is None or row.started == started(row.pid)


def live_owner_ids(store: Store) -> set[str]:
    """Owners still there; the rows of the others are forgotten on the way."""
    now = time.time()
    rows = store.owners()
    live = {r.id for r in rows if is_live(r, now)}
    gone = [r.id for r in rows if r.id not in live]
    if gone:
        # A read-only look must not fail for want of tidying.
        with contextlib.suppress(Exception):
            store.forget_owners(gone)
    return live


def register(store: Store, owner: Owner) -> None:
    pid = os.getpid()
    store.register_owner(
        OwnerRow(owner.id, pid, socket.gethostname(), owner.label, time.time(), started(pid))
    )


class Heartbeat:
    """Beats an owner's row every ``interval`` seconds from a daemon thread, until stopped.

    A thread, not the kernel's event loop: a cell that blocks for minutes while a question waits
    must not make its owner look gone (another kernel would then run the same turn).
    """

    def __init__(self, store: Store, owner: Owner, interval: float | None = None) -> None:
        self.store, self.owner = store, owner
        self.interval = HEARTBEAT_SECONDS if interval is None else interval
        self._stop: threading.Event | None = None

    @property
    def running(self) -> bool:
        return self._stop is not None

    def start(self) -> None:
        if self._stop is not None:
            return
        stop = self._stop = threading.Event()  # each thread has its own: a restart never races
        threading.Thread(
            target=self._beat, args=(stop,), name="deeptutor-heartbeat", daemon=True
        ).start()

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._stop = None

    def _beat(self, stop: threading.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):  # a locked or full store: beat again next time
                register(self.store, self.owner)
            stop.wait(self.interval)
