"""The session's watcher (runtime/watcher.py): answers from elsewhere and the owner's heartbeat."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from deeptutor_jupyter.interaction.owners import Owner
from deeptutor_jupyter.runtime.home import Home, open_home
from deeptutor_jupyter.runtime.watcher import Watcher
from deeptutor_jupyter.store.db import PendingRow, QuestionState, Store


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    opened = open_home(tmp_path, workspace=tmp_path, expiry_seconds=3600)
    yield opened
    opened.store.close()


async def until(check: Callable[[], object], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the watcher did not get there in time"
        await asyncio.sleep(0.02)


async def test_a_question_answered_in_another_process_reaches_its_card_then_the_watch_ends(
    home: Home, tmp_path: Path
) -> None:
    now = time.time()
    row = PendingRow(
        "ask_1", "s-1", "turn-1", "call_1", {"mode": "text"}, "pending", now, now + 600,
        None, None,
    )  # fmt: skip
    home.store.add_pending(row, None)
    seen: list[QuestionState] = []

    def update(state: QuestionState) -> bool:
        seen.append(state)
        return state.status == "answered"

    watcher = Watcher(home.store, home.coordinator, None, running=lambda: 0)
    watcher.follow("ask_1", update)
    await until(lambda: seen)  # looked at once
    assert seen[0].status == "pending"
    other = Store(tmp_path / "state.db")  # another kernel answers
    try:
        assert other.resolve_pending("ask_1", "answered", {"customInput": "4"}, time.time())
    finally:
        other.close()
    await until(lambda: seen[-1].status == "answered")
    assert seen[-1].result == {"customInput": "4"}
    # Nothing runs here and nothing is followed any more: the watch ends by itself.
    await until(lambda: watcher._task is None or watcher._task.done())


async def test_while_a_turn_runs_the_owner_row_is_renewed(home: Home) -> None:
    owner = Owner.this_process("lesson.ipynb")
    running = [1]
    watcher = Watcher(home.store, home.coordinator, owner, running=lambda: running[0])
    assert owner.id not in {r.id for r in home.store.owners()}
    watcher.start()
    await until(lambda: owner.id in {r.id for r in home.store.owners()})
    running[0] = 0
    watcher.stop_if_idle()
    assert watcher._task is None


def test_without_an_event_loop_the_watcher_does_not_start(home: Home) -> None:
    watcher = Watcher(home.store, home.coordinator, None, running=lambda: 1)
    watcher.start()
    assert watcher._task is None
