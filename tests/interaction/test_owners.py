"""Owner liveness (interaction/owners.py): only a fresh heartbeat from the very process that
registered counts; a stale beat, a dead or zombie pid, or a pid now used by another process is
an owner that is gone, whose question the answering surface resumes."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from deeptutor_jupyter.interaction.owners import (
    STALE_SECONDS,
    Heartbeat,
    Owner,
    is_live,
    live_owner_ids,
    pid_alive,
    register,
    started,
)
from deeptutor_jupyter.store.db import OwnerRow, Store

HERE = socket.gethostname()


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that is not this one: what a reused pid looks like."""
    with subprocess.Popen(["sleep", "60"]) as child:
        yield child
        child.kill()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "state.db")
    yield s
    s.close()


def row(pid: int, beat: float, host: str = HERE, start: str | None = None) -> OwnerRow:
    return OwnerRow(f"{host}:{pid}:x", pid, host, "lesson.ipynb", beat, start)


def test_a_running_pid_with_a_stale_heartbeat_is_gone(
    sleeper: subprocess.Popen[bytes],
) -> None:
    now = time.time()
    assert pid_alive(sleeper.pid)
    assert is_live(row(sleeper.pid, now - 1), now)
    assert not is_live(row(sleeper.pid, now - STALE_SECONDS - 1), now)


def test_the_heartbeat_is_fresh_up_to_the_stale_limit_on_every_host() -> None:
    now = time.time()
    for host in (HERE, "another-host"):
        assert is_live(row(os.getpid(), now - STALE_SECONDS, host), now)
        assert not is_live(row(os.getpid(), now - STALE_SECONDS - 0.001, host), now)


def test_a_pid_now_used_by_another_process_is_not_the_owner(
    sleeper: subprocess.Popen[bytes],
) -> None:
    now = time.time()
    mine = started(os.getpid())
    assert mine is not None and started(sleeper.pid) not in (None, mine)
    # The owner row says when its process started: the same pid with another start is not it.
    assert is_live(row(os.getpid(), now, start=mine), now)
    assert not is_live(row(sleeper.pid, now, start=mine), now)


def test_a_dead_pid_and_a_zombie_are_gone() -> None:
    now = time.time()
    with subprocess.Popen(["true"]) as child:
        # Not reaped yet: a zombie, as a killed kernel is for a few seconds.
        wait_until(lambda: Path(f"/proc/{child.pid}/stat").read_text().split()[2] == "Z", "Z")
        assert not pid_alive(child.pid)
        assert not is_live(row(child.pid, now), now)
    assert not is_live(row(child.pid, now), now)  # reaped: no such process


def test_live_owner_ids_keeps_the_live_and_forgets_the_gone(
    store: Store, sleeper: subprocess.Popen[bytes]
) -> None:
    owner = Owner.this_process("lesson.ipynb")
    register(store, owner)
    [mine] = store.owners()
    assert mine.started == started(os.getpid())
    store.register_owner(row(sleeper.pid, time.time() - STALE_SECONDS - 5))
    assert live_owner_ids(store) == {owner.id}
    assert [r.id for r in store.owners()] == [owner.id]


def test_the_heartbeat_beats_on_a_thread_of_its_own(store: Store) -> None:
    owner = Owner.this_process("lesson.ipynb")
    beat = Heartbeat(store, owner, interval=0.02)
    beat.start()
    try:
        wait_until(lambda: len(store.owners()) == 1, "the first beat")
        first = store.owners()[0].heartbeat
        wait_until(lambda: store.owners()[0].heartbeat > first, "a later beat")
    finally:
        beat.stop()
    assert not beat.running
