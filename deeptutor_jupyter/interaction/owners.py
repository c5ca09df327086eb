"""Which process owns a waiting turn, and whether it is still there.

A question is answered wherever the learner happens to be (another notebook's kernel, the sidebar's
server, the API), but its turn runs on in the process that asked it, in its own cell. That process
registers itself in ``owners`` and beats while it has turns running; an answer given elsewhere
is only consumed in SQLite and the owner notices. A process that is gone (its pid is dead on this
host, or its heartbeat is stale) owns nothing, and the surface that answers resumes the turn.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from dataclasses import dataclass

from deeptutor_jupyter.store.db import OwnerRow, Store

HEARTBEAT_SECONDS = 5.0
# Only for an owner on another host (a shared home on a network disk). On this host the pid says
# it: a kernel busy with a long blocking cell misses beats but must not lose its turn.
STALE_SECONDS = 60.0


@dataclass(frozen=True)
class Owner:
    id: str
    label: str  # the notebook (or surface) this process serves

    @classmethod
    def this_process(cls, label: str) -> Owner:
        return cls(f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}", label)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def is_live(row: OwnerRow, now: float | None = None) -> bool:
    if row.host == socket.gethostname():
        return pid_alive(row.pid)
    now = time.time() if now is None else now
    return now - row.heartbeat <= STALE_SECONDS


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
    store.register_owner(
        OwnerRow(owner.id, os.getpid(), socket.gethostname(), owner.label, time.time())
    )
