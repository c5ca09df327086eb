"""Rows and bytes a streamed answer adds to state.db (issue 14, row 2), and exact replay.

A real ``Store`` (SQLite in a temp dir) and an ``EventLog`` emit one turn: ``turn_started``, a
tool call, ``--tokens`` content events of 4 characters (a 5 MB answer is 1.25 M of them), ``done``.
Printed beside the floor: the answer's own size, and one row per event that is not streamed text.

    .venv/bin/python benchmarks/event_rows.py [--tokens 1250000] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deeptutor_jupyter.agent.events import (
    Content,
    Done,
    ToolCallFinished,
    ToolCallStarted,
    TurnStarted,
)
from deeptutor_jupyter.runtime.events import EventLog
from deeptutor_jupyter.store.db import Store


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tokens", type=int, default=250_000)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    n = 2_000 if a.quick else a.tokens
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.db"
        store = Store(path)
        base = os.path.getsize(path)
        log = EventLog("turn-1", store)
        start = time.perf_counter()
        log.emit(TurnStarted(session_id="s", question="q", model="m"))
        log.emit(Content(text="Let me compute. "))
        log.emit(ToolCallStarted(id="c1", name="calculate", arguments='{"expression": "2+2"}'))
        log.emit(ToolCallFinished(id="c1", name="calculate", content="4"))
        for i in range(n):
            log.emit(Content(text=f"w{i % 100:02d} "))
        log.emit(Done(status="done"))
        emit_s = time.perf_counter() - start
        store.close()
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            rows = int(db.execute("SELECT COUNT(*) FROM events").fetchone()[0])
        size = os.path.getsize(path) - base
        answer = sum(
            len(e.fields().get("text", "")) for e in log.events if e.body.type == "content"
        )
        store = Store(path)
        start = time.perf_counter()
        replayed = store.events_with_time("turn-1", 0)
        replay_s = time.perf_counter() - start
        store.close()
    exact = [(s, t, d) for s, t, d, _ in replayed] == [
        (e.seq, e.body.type, e.fields()) for e in log.events
    ]
    floor_rows = 6  # started, content, tool_call, tool_result, one run of content, done
    print(f"event rows benchmark: {len(log.events):,} events, answer {answer:,} chars")
    print(
        f"rows in state.db: {rows:,} (floor {floor_rows}: one per event that is not streamed text)"
    )
    print(f"state.db growth: {size:,} bytes = {size / answer:.2f}x the answer (floor ~1x)")
    print(f"emit+persist {emit_s:.2f} s; replay of every event {replay_s:.2f} s")
    print(f"replay exact: {'yes' if exact else 'NO'}")
    print(f"RESULT: {'PASS' if exact and rows <= floor_rows else 'FAIL'} rows {rows}")


if __name__ == "__main__":
    main()
