"""Streamed text is saved as runs (store/event_rows.py) and replayed exactly, from any seq."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.agent.events import (
    Content,
    Done,
    Notice,
    Thinking,
    ToolCallStarted,
    TurnStarted,
    parse_event,
)
from deeptutor_jupyter.runtime.events import Event, EventLog
from deeptutor_jupyter.runtime.session import TutorSession
from deeptutor_jupyter.runtime.session_reads import stored_events
from deeptutor_jupyter.store.db import Store
from deeptutor_jupyter.store.event_rows import PARTS, coalesce
from tests.runtime.fake_model_env import use_fake_model


def record(store: Store) -> list[Event]:
    log = EventLog("t-1", store)
    log.emit(TurnStarted(session_id="s", question="q", model="m"))
    for word in ["Read", "ing ", "notes"]:
        log.emit(Content(text=word, explore=True))
    for word in ["hm", "m, ", "think"]:
        log.emit(Thinking(text=word))
    for i in range(200):
        log.emit(Content(text=f"tok{i} "))
    log.emit(ToolCallStarted(id="c1", name="calculate", arguments="{}"))
    log.emit(Content(text="alone"))
    log.emit(Done(status="done"))
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
            assert [(s, t, d) for s, t, d, _ in replayed] == [
                (e.seq, e.body.type, e.fields()) for e in want
            ]
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
            e.fields()["text"]
            for e in events
            if e.body.type == "content" and not e.fields().get("explore")
        )
        middle = next(e.seq for e in events if e.fields().get("text") == "tok100 ")
        seen = [e for e in events if e.seq <= middle]
        got: list[Event] = []
        live = session.subscribe("t-1", got.append, after_seq=middle)
        assert live is False  # the turn is not running here: replayed from the store
        shown = [*seen, *got]
        text = "".join(
            e.fields()["text"]
            for e in shown
            if e.body.type == "content" and not e.fields().get("explore")
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


def test_a_row_holds_what_the_emitter_set_as_before_events_were_typed(tmp_path: Path) -> None:
    # Old stores replay and the panel's generated types stay true: a row is the fields the
    # emitter gave, no defaults added; on the wire they sit beside type, seq, turn_id, ts.
    store = Store(tmp_path / "state.db")
    try:
        log = EventLog("t-1", store, start_seq=4)
        log.emit(Done(status="error", answer=""))
        log.emit(Notice(text="wait", retry_in=2.0, reason="limited", status=429))
        rows = [(s, k, d) for s, k, d, _ in store.events_with_time("t-1")]
        assert rows == [
            (5, "done", {"status": "error", "answer": ""}),
            (6, "notice", {"text": "wait", "retry_in": 2.0, "reason": "limited", "status": 429}),
        ]
        first = log.events[0]
        assert first.envelope() == {
            "status": "error",
            "answer": "",
            "type": "done",
            "seq": 5,
            "turn_id": "t-1",
            "ts": first.ts,
        }
        assert parse_event(first.envelope()) == first
    finally:
        store.close()


def test_a_row_no_model_fits_is_left_out_of_a_replay_not_the_rows_after_it(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "state.db")
    try:
        store.append_events(
            [
                ("t-1", 1, "content", {"text": "a"}, 1.0),
                ("t-1", 2, "done", {"status": "exploded"}, 2.0),  # not a status
                ("t-1", 3, "notice", {"text": "n"}, 3.0),
            ]
        )
        replayed = stored_events(store, "t-1")
        assert [(e.seq, e.body) for e in replayed] == [
            (1, Content(text="a")),
            (3, Notice(text="n")),
        ]
    finally:
        store.close()


def _streamed_answer(chars: int) -> list[str]:
    """Token-like deltas of 1-8 random letters (random text: zlib gains little on it)."""
    import random

    rnd, deltas, size = random.Random(28), [], 0
    while size < chars:
        word = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(0, 7)))
        deltas.append(word + " ")
        size += len(word) + 1
    return deltas


def _db_bytes(path: Path) -> int:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        return int(pages * db.execute("PRAGMA page_size").fetchone()[0])


async def test_a_streamed_answer_grows_state_db_by_at_most_twice_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 28: the answer was stored four times (done event, turns, messages, content runs).
    from deeptutor_jupyter.config import resolve_settings
    from deeptutor_jupyter.runtime.session import AskOptions
    from deeptutor_jupyter.testing import FakeLLMServer, Reply

    deltas = _streamed_answer(100_000)
    answer = "".join(deltas)
    with FakeLLMServer([Reply(text="Warm."), *[Reply(chunks=deltas)] * 6]) as server:
        use_fake_model(monkeypatch, tmp_path / "home", server.url)
        session = TutorSession("lesson.ipynb", resolve=lambda f: resolve_settings(flags=f))
        resolved = session.resolve({})
        warm = session.ask("Hello", resolved, AskOptions())
        assert warm.task is not None
        await asyncio.wait_for(warm.task, 30)
        path = tmp_path / "home" / "state.db"
        before = _db_bytes(path)
        turn = session.ask("Tell me everything", resolved, AskOptions())
        events: list[Event] = []
        turn.log.subscribe(events.append)
        assert turn.task is not None
        await asyncio.wait_for(turn.task, 60)
        grown = _db_bytes(path) - before
        for model in session.models.values():
            await model.aclose()
    assert turn.status == "done" and turn.answer == answer
    assert grown <= 2 * len(answer) + 16_384, f"{grown:,} bytes for a {len(answer):,}-char answer"
    # Every copy that was dropped is still read back whole, by each reader.
    store = Store(path)
    try:
        row = store.get_turn(turn.turn_id)
        assert row is not None and row.answer == answer
        assert [t.answer for t in store.turns(row.session_id)][-1] == answer
        replayed = store.events(turn.turn_id)
        assert [(s, t, d) for s, t, d in replayed] == [
            (e.seq, e.body.type, e.fields()) for e in events
        ]
        assert replayed[-1][1] == "done" and replayed[-1][2]["answer"] == answer
        assert store.history(row.session_id)[-1] == {"role": "assistant", "content": answer}
    finally:
        store.close()


def test_a_store_written_before_answers_were_kept_once_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    Store(path).close()
    run = {"text": "Hello there, " * 100, PARTS: [13] * 100}
    with sqlite3.connect(path) as db:  # the rows an older version wrote, all JSON text
        db.execute(
            "INSERT INTO sessions (id, notebook, created_at, updated_at)"
            " VALUES ('s', 'n.ipynb', 1, 1)"
        )
        db.execute(
            "INSERT INTO turns (id, session_id, question, model, status, answer, created_at)"
            " VALUES ('t', 's', 'q', 'm', 'done', ?, 1)",
            (run["text"],),
        )
        done = {"status": "done", "answer": run["text"], "rounds": 1}
        for seq, kind, data in [(100, "content", run), (101, "done", done)]:
            db.execute(
                "INSERT INTO events VALUES ('t', ?, ?, ?, 1.0)", (seq, kind, json.dumps(data))
            )
    store = Store(path)
    try:
        got = store.events("t")
        assert len(got) == 101 and got[0] == (1, "content", {"text": "Hello there, "})
        assert got[-1] == (101, "done", done)
        row = store.get_turn("t")
        assert row is not None and row.answer == run["text"]
    finally:
        store.close()
