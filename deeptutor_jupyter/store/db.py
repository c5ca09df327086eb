"""The learner's SQLite store: sessions, turns, their events and the conversation history.

One file per learner (``$DEEPTUTOR_HOME/state.db``) in WAL mode, so the kernel of every notebook,
the sidebar and the hub service can read while one of them writes. Calls are short and synchronous;
the kernel loop can afford them and it keeps the ordering of a turn's writes obvious.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    notebook TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_notebook ON sessions (notebook, updated_at);
CREATE TABLE IF NOT EXISTS turns (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    cell_id TEXT,
    question TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    answer TEXT,
    error TEXT,
    created_at REAL NOT NULL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS turns_by_session ON turns (session_id, created_at);
CREATE TABLE IF NOT EXISTS events (
    turn_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    ts REAL NOT NULL,
    PRIMARY KEY (turn_id, seq)
);
CREATE TABLE IF NOT EXISTS pending (
    request_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    answered_at REAL,
    result TEXT
);
CREATE INDEX IF NOT EXISTS pending_by_session ON pending (session_id, status);
CREATE TABLE IF NOT EXISTS turn_states (
    request_id TEXT PRIMARY KEY,
    turn_id TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    turn_id TEXT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)
);
"""


@dataclass(frozen=True)
class TurnRow:
    id: str
    session_id: str
    cell_id: str | None
    question: str
    model: str
    status: str
    answer: str | None
    error: str | None
    created_at: float
    finished_at: float | None


@dataclass(frozen=True)
class PendingRow:
    request_id: str
    session_id: str
    turn_id: str
    tool_call_id: str
    payload: dict[str, Any]
    status: str  # pending | answered | cancelled | expired
    created_at: float
    expires_at: float
    answered_at: float | None
    result: dict[str, Any] | None

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> PendingRow:
        values = list(row)
        values[4] = json.loads(values[4])
        values[9] = json.loads(values[9]) if values[9] else None
        return cls(*values)


_PENDING_COLUMNS = (
    "request_id, session_id, turn_id, tool_call_id, payload, status, created_at, expires_at,"
    " answered_at, result"
)


class StoreError(RuntimeError):
    """The store could not be written; the message says why in words (disk full, read-only...)."""


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        # One connection shared by the kernel loop and, rarely, widget callbacks on a subshell
        # thread; the lock serialises them.
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.RLock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA busy_timeout=5000")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
            self._conn.execute(
                "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                yield self._conn
                self._conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise StoreError(_explain(exc, self.path)) from exc
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self._conn.execute(sql, tuple(params)))

    # sessions ----------------------------------------------------------------------------
    def ensure_session(self, session_id: str, notebook: str) -> None:
        now = time.time()
        with self._tx() as c:
            c.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at",
                (session_id, notebook, now, now),
            )

    def latest_session(self, notebook: str) -> str | None:
        rows = self._query(
            "SELECT id FROM sessions WHERE notebook = ? ORDER BY updated_at DESC LIMIT 1",
            (notebook,),
        )
        return rows[0][0] if rows else None

    def notebook_of(self, session_id: str) -> str | None:
        """The notebook a session belongs to (the sidebar says where a question waits)."""
        rows = self._query("SELECT notebook FROM sessions WHERE id = ?", (session_id,))
        return str(rows[0][0]) if rows else None

    # turns -------------------------------------------------------------------------------
    def start_turn(
        self, turn_id: str, session_id: str, question: str, model: str, cell_id: str | None
    ) -> None:
        with self._tx() as c:
            # A resumed turn keeps its row; it is simply running again.
            c.execute(
                "INSERT INTO turns (id, session_id, cell_id, question, model, status, created_at)"
                " VALUES (?, ?, ?, ?, ?, 'running', ?)"
                " ON CONFLICT(id) DO UPDATE SET status = 'running', finished_at = NULL",
                (turn_id, session_id, cell_id, question, model, time.time()),
            )

    def finish_turn(
        self, turn_id: str, status: str, answer: str | None, error: str | None = None
    ) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE turns SET status = ?, answer = ?, error = ?, finished_at = ? WHERE id = ?",
                (status, answer, error, time.time(), turn_id),
            )

    def get_turn(self, turn_id: str) -> TurnRow | None:
        rows = self._query(
            "SELECT id, session_id, cell_id, question, model, status, answer, error, created_at,"
            " finished_at FROM turns WHERE id = ?",
            (turn_id,),
        )
        return TurnRow(*rows[0]) if rows else None

    def turns(self, session_id: str) -> list[TurnRow]:
        rows = self._query(
            "SELECT id, session_id, cell_id, question, model, status, answer, error, created_at,"
            " finished_at FROM turns WHERE session_id = ? ORDER BY created_at",
            (session_id,),
        )
        return [TurnRow(*r) for r in rows]

    # events ------------------------------------------------------------------------------
    def append_events(self, rows: Iterable[tuple[str, int, str, dict[str, Any], float]]) -> None:
        with self._tx() as c:
            c.executemany(
                "INSERT OR REPLACE INTO events VALUES (?, ?, ?, ?, ?)",
                [(t, s, typ, json.dumps(d, ensure_ascii=False), ts) for t, s, typ, d, ts in rows],
            )

    def last_seq(self, turn_id: str) -> int:
        rows = self._query("SELECT COALESCE(MAX(seq), 0) FROM events WHERE turn_id = ?", (turn_id,))
        return int(rows[0][0])

    def events(self, turn_id: str, after_seq: int = 0) -> list[tuple[int, str, dict[str, Any]]]:
        rows = self._query(
            "SELECT seq, type, data FROM events WHERE turn_id = ? AND seq > ? ORDER BY seq",
            (turn_id, after_seq),
        )
        return [(seq, typ, json.loads(data)) for seq, typ, data in rows]

    # pending interactions and paused turns ------------------------------------------------
    def add_pending(self, row: PendingRow, state: dict[str, Any] | None) -> None:
        """The question and the paused turn are saved together, or neither is."""
        with self._tx() as c:
            c.execute(
                f"INSERT INTO pending ({_PENDING_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.request_id,
                    row.session_id,
                    row.turn_id,
                    row.tool_call_id,
                    json.dumps(row.payload, ensure_ascii=False),
                    row.status,
                    row.created_at,
                    row.expires_at,
                    None,
                    None,
                ),
            )
            if state is not None:
                c.execute(
                    "INSERT OR REPLACE INTO turn_states VALUES (?, ?, ?, ?)",
                    (
                        row.request_id,
                        row.turn_id,
                        json.dumps(state, ensure_ascii=False),
                        time.time(),
                    ),
                )

    def get_pending(self, request_id: str) -> PendingRow | None:
        rows = self._query(
            f"SELECT {_PENDING_COLUMNS} FROM pending WHERE request_id = ?", (request_id,)
        )
        return PendingRow.from_row(rows[0]) if rows else None

    def resolve_pending(
        self, request_id: str, status: str, result: dict[str, Any], answered_at: float
    ) -> bool:
        """Consume a pending request; False when it was no longer pending (answered elsewhere)."""
        with self._tx() as c:
            cursor = c.execute(
                "UPDATE pending SET status = ?, result = ?, answered_at = ?"
                " WHERE request_id = ? AND status = 'pending'",
                (status, json.dumps(result, ensure_ascii=False), answered_at, request_id),
            )
            return cursor.rowcount == 1

    def pending_for(self, session_ids: Iterable[str] | None = None) -> list[PendingRow]:
        """Pending requests of these sessions (all sessions when None), oldest first."""
        sql = f"SELECT {_PENDING_COLUMNS} FROM pending WHERE status = 'pending'"
        params: list[str] = []
        if session_ids is not None:
            ids = list(session_ids)
            sql += f" AND session_id IN ({', '.join('?' for _ in ids)})"
            params = ids
        rows = self._query(sql + " ORDER BY created_at", params)
        return [PendingRow.from_row(r) for r in rows]

    def sessions_of(self, notebook: str) -> list[str]:
        rows = self._query("SELECT id FROM sessions WHERE notebook = ?", (notebook,))
        return [r[0] for r in rows]

    def turn_state(self, request_id: str) -> dict[str, Any] | None:
        rows = self._query("SELECT state FROM turn_states WHERE request_id = ?", (request_id,))
        if not rows:
            return None
        try:
            state = json.loads(rows[0][0])
        except ValueError:
            return None
        return state if isinstance(state, dict) else None

    def drop_turn_state(self, request_id: str) -> None:
        with self._tx() as c:
            c.execute("DELETE FROM turn_states WHERE request_id = ?", (request_id,))

    # conversation history ----------------------------------------------------------------
    def append_messages(
        self, session_id: str, turn_id: str, messages: Iterable[dict[str, Any]]
    ) -> None:
        with self._tx() as c:
            (start,) = c.execute(
                "SELECT COALESCE(MAX(idx) + 1, 0) FROM messages WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            c.executemany(
                "INSERT INTO messages VALUES (?, ?, ?, ?)",
                [
                    (session_id, start + i, turn_id, json.dumps(m, ensure_ascii=False))
                    for i, m in enumerate(messages)
                ],
            )

    def history(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT message FROM messages WHERE session_id = ? ORDER BY idx", (session_id,)
        )
        return [json.loads(r[0]) for r in rows]


def _explain(exc: sqlite3.OperationalError, path: Path) -> str:
    text = str(exc)
    if "full" in text:
        return f"The disk holding {path} is full; this turn could not be saved ({text})."
    if "readonly" in text or "read-only" in text:
        return f"{path} is read-only; this turn could not be saved ({text})."
    if "locked" in text:
        return f"{path} stayed locked by another process; this turn could not be saved ({text})."
    return f"Could not write {path}: {text}"
