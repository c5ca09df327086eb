"""Streamed text is saved as runs (store/event_rows.py) and replayed exactly, from any seq."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from deeptutor_jupyter.runtime.event_types import parse_event
from deeptutor_jupyter.runtime.events import Event, EventLog
from deeptutor_jupyter.runtime.session import TutorSession
from deeptutor_jupyter.store.db import Store
from deeptutor_jupyter.store.event_rows import coalesce


def record(store: Store) -> list[Event]:
    log = EventLog("t-1", store)
    log.emit("turn_started", session_id="s", question="q", model="m")
    for word in ["Read", "ing ", "notes"]:
        log.emit("content", text=word, explore=True)
    for word in ["hm", "m, ", "think"]:
        log.emit("thinking", text=word)
    for i in range(200):
        log.emit("content", text=f"tok{i} ")
    log.emit("tool_call", id="c1", name="calculate", arguments="{}")
    log.emit("content", text="alone")
    log.emit("done", status="done")
    return log.events


def rows_in(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM events").fetchone()[0])


def test_text_runs_are_one_row_each_and_replay_gives_every_event_back(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    try:
        events = record(store)
        assert len(events) == 210
        assert rows_in(tmp_path / "state.db") == 7  # started, 3 runs, tool_call, alone, done
        assert store.last_seq("t-1") == events[-1].seq
        for after in range(0, len(events) + 1):
            replayed = store.events_with_time("t-1", after)
            want = [e for e in events if e.seq > after]
            assert [(s, t, d) for s, t, d, _ in replayed] == [(e.seq, e.type, e.data) for e in want]
            for seq, kind, data, ts in replayed:  # the typed contract still holds
                parse_event({**data, "type": kind, "seq": seq, "turn_id": "t-1", "ts": ts})
    finally:
        store.close()


def test_a_view_reconnecting_in_the_middle_of_a_run_rebuilds_the_exact_answer(
    tmp_path: Path,
) -> None:
    session = TutorSession("lesson.ipynb", resolve=lambda _o: None)  # type: ignore[arg-type,return-value]
    session._store = store = Store(tmp_path / "state.db")  # a store with a recorded turn
    try:
        events = record(store)
        answer = "".join(
            e.data["text"] for e in events if e.type == "content" and not e.data.get("explore")
        )
        middle = next(e.seq for e in events if e.data.get("text") == "tok100 ")
        seen = [e for e in events if e.seq <= middle]
        got: list[Event] = []
        live = session.subscribe("t-1", got.append, after_seq=middle)
        assert live is False  # the turn is not running here: replayed from the store
        shown = [*seen, *got]
        text = "".join(
            e.data["text"] for e in shown if e.type == "content" and not e.data.get("explore")
        )
        assert text == answer
        assert [e.seq for e in got] == list(range(middle + 1, events[-1].seq + 1))
    finally:
        store.close()


def test_only_consecutive_text_of_one_kind_and_flag_merges() -> None:
    def row(seq: int, kind: str, **data: Any) -> tuple[str, int, str, dict[str, Any], float]:
        return ("t", seq, kind, data, float(seq))

    rows = [
        row(1, "content", text="a"),
        row(2, "content", text="b", explore=True),
        row(3, "content", text="c", explore=True),
        row(4, "thinking", text="d"),
        row(6, "thinking", text="e"),  # a gap in seq: not one run
        row(7, "notice", text="n"),
    ]
    merged = coalesce(rows)
    assert [(r[1], r[2], r[3].get("text")) for r in merged] == [
        (1, "content", "a"),
        (3, "content", "bc"),
        (4, "thinking", "d"),
        (6, "thinking", "e"),
        (7, "notice", "n"),
    ]
