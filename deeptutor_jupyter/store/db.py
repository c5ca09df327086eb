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
from typing import TYPE_CHECKING, Any, ClassVar

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.redact import clean

if TYPE_CHECKING:
    from deeptutor_jupyter.messages import Message

SCHEMA_VERSION = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    notebook TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    title TEXT,
    choice TEXT
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
    finished_at REAL,
    shown TEXT
);
CREATE INDEX IF NOT EXISTS turns_by_session ON turns (session_id, created_at);
CREATE TABLE IF NOT EXISTS owners (
    id TEXT PRIMARY KEY,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    label TEXT NOT NULL,
    heartbeat REAL NOT NULL,
    started TEXT
);
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
CREATE INDEX IF NOT EXISTS pending_by_status ON pending (status);
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
    # What the learner said or did, when the question sent was composed for them (the cell's
    # code, a traceback, a lesson's instructions): the panel's bubble and the conversation's
    # name. None: the question is the learner's own words.
    shown: str | None = None

    @property
    def said(self) -> str:
        return self.shown or self.question


@dataclass(frozen=True)
class PendingRow:
    request_id: str
    session_id: str
    turn_id: str
    tool_call_id: str
    payload: dict[str, Any]
    status: str  # pending | grading (a quiz being graded) | answered | cancelled | expired
    created_at: float
    expires_at: float
    answered_at: float | None
    # The answer once given; on a reopened question, the answer a crashed resume never used.
    result: dict[str, Any] | None
    owner: str | None = None  # the process whose turn waits on it (see owners)
    place: dict[str, Any] | None = None  # where that turn shows: notebook, cell label
    # What pauses: ask_user, quiz (make_quiz) or review (%tutor review, no turn). One table for
    # every kind: one listing, one owner rule, one consume-once UPDATE (interaction/pending.py).
    kind: str = "ask_user"

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> PendingRow:
        values = list(row)
        values[4] = json.loads(values[4])
        values[9] = json.loads(values[9]) if values[9] else None
        values[11] = json.loads(values[11]) if values[11] else None
        values[12] = values[12] or "ask_user"  # rows written before kinds existed
        return cls(*values)


_PENDING_COLUMNS = (
    "request_id, session_id, turn_id, tool_call_id, payload, status, created_at, expires_at,"
    " answered_at, result, owner, place, kind"
)
# Columns added after version 1; an older state.db gets them on open.
_ADDED_COLUMNS = {
    # answer_at: the messages idx holding the turn's answer, when it is that message's content
    # (turns.answer is then NULL): the answer is kept once, not in turns and messages both.
    # shown: the learner's words when the question sent was composed (``%tutor why``, --cell).
    # replaced_by: the turn that regenerated this one (the panel's Regenerate); its row, events
    # and messages stay, out of the history and the turn list (runtime/session_edits.py).
    # deleted_at: a conversation the learner deleted, hidden from every read (same file).
    "turns": ("owner", "answer_at", "shown", "replaced_by"),
    "pending": ("owner", "place", "kind"),
    # choice: the model and knowledge bases chosen for the conversation (runtime/choice.py).
    "sessions": ("title", "choice", "deleted_at"),
    "owners": ("started",),
    "messages": ("replaced_by",),
}
_LATE_INDEXES = "CREATE INDEX IF NOT EXISTS turns_by_status ON turns (status);"


@dataclass(frozen=True)
class QuestionState:
    status: str  # pending | grading | answered | cancelled | expired
    result: dict[str, Any] | None
    answered_at: float | None
    turn_status: str | None  # running | done | error | cancelled | interrupted


@dataclass(frozen=True)
class OwnerRow:
    id: str
    pid: int
    host: str
    label: str
    heartbeat: float
    # When the process started ("<boot id>:<start ticks>", interaction/owners.py): a pid that
    # was reused by another process has another start. None where /proc cannot say.
    started: str | None = None


class StoreError(DeepTutorError, RuntimeError):
    code = "store"

    """The store could not be written; the message says why in words (disk full, read-only...)."""


class DiskFullError(StoreError):
    code = "disk_full"

    """The disk (or the quota) holding the store is full: a turn cannot go on saving itself."""


class CleanWrites:
    """The connection as a transaction sees it: every value written is scrubbed of the keys
    first (redact.py), so no table (a typed answer, a question, an event) can hold one."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, clean(tuple(params)))

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> sqlite3.Cursor:
        return self._conn.executemany(sql, (clean(tuple(r)) for r in rows))


class SQLiteFile:
    """One learner's SQLite file, private and in WAL mode, with its schema: the base of the
    store's tables and of the learning tables (store/learning.py), which share the file."""

    SCHEMA: ClassVar[str] = ""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.RLock()
        # Set when an existing home readable by others was tightened; the magic says so once.
        self.notice: str | None = None
        try:
            self._conn = self._open(path)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(_explain(exc, path)) from exc

    def _open(self, path: Path) -> sqlite3.Connection:
        from deeptutor_jupyter._files import ensure_private_dir, private_file, private_tree, tighten

        # The home holds every conversation and answer: 0700, and the database 0600 before
        # SQLite creates it with the umask's mode (its -wal and -shm copy the database's mode).
        if ensure_private_dir(path.parent):
            # What older versions wrote with the umask's mode; only the tutor's own entries, in
            # case the home is a folder that also holds other things.
            for name in ("audit", "memory", "kb", "settings.toml", path.name):
                if (path.parent / name).exists():
                    private_tree(path.parent / name)
            self.notice = (
                f"Your tutor folder {path.parent} was readable by other users; it is now "
                "private (only you can read it)."
            )
        private_file(path)
        # One connection shared by the kernel loop and, rarely, widget callbacks on a subshell
        # thread; the lock serialises them.
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        try:
            with self._lock:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA busy_timeout=5000")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(self.SCHEMA)
                self._upgrade(conn)
        except BaseException:
            conn.close()
            raise
        for suffix in ("-wal", "-shm"):
            tighten(path.with_name(path.name + suffix))
        return conn

    def _upgrade(self, conn: sqlite3.Connection) -> None:
        """What an older file needs after the schema ran (added columns, late indexes)."""

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[CleanWrites]:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                yield CleanWrites(self._conn)
                self._conn.execute("COMMIT")
            except (sqlite3.OperationalError, OSError) as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise _store_error(exc, self.path) from exc
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self._conn.execute(sql, tuple(params)))


class Store(SQLiteFile):
    SCHEMA = _SCHEMA

    def _upgrade(self, conn: sqlite3.Connection) -> None:
        _migrate(conn)
        conn.executescript(_LATE_INDEXES)

    def data_version(self) -> int:
        """Changes when another connection commits: a cheap 'did anything happen' probe."""
        return int(self._query("PRAGMA data_version")[0][0])

    # sessions ----------------------------------------------------------------------------
    def ensure_session(self, session_id: str, notebook: str) -> None:
        now = time.time()
        with self._tx() as c:
            c.execute(
                "INSERT INTO sessions (id, notebook, created_at, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at",
                (session_id, notebook, now, now),
            )

    def latest_session(self, notebook: str) -> str | None:
        rows = self._query(
            "SELECT id FROM sessions WHERE notebook = ? AND deleted_at IS NULL"
            " ORDER BY updated_at DESC LIMIT 1",
            (notebook,),
        )
        return rows[0][0] if rows else None

    def rename_session(self, session_id: str, title: str) -> bool:
        """Name a conversation (the panel's Rename); an empty title goes back to its first
        question. False when there is no such conversation."""
        with self._tx() as c:
            cur = c.execute(
                "UPDATE sessions SET title = ? WHERE id = ?", (title.strip() or None, session_id)
            )
            return cur.rowcount > 0

    def session_title(self, session_id: str) -> str | None:
        """The name the learner gave a conversation, None when it has none."""
        rows = self._query("SELECT title FROM sessions WHERE id = ?", (session_id,))
        return rows[0][0] if rows and rows[0][0] else None

    def set_session_choice(self, session_id: str, choice: dict[str, Any] | None) -> bool:
        """Keep a conversation's chosen model and knowledge bases (None: back to the defaults).
        False when there is no such conversation."""
        value = json.dumps(choice) if choice else None
        with self._tx() as c:
            cur = c.execute("UPDATE sessions SET choice = ? WHERE id = ?", (value, session_id))
            return cur.rowcount > 0

    def session_choice(self, session_id: str) -> dict[str, Any] | None:
        rows = self._query("SELECT choice FROM sessions WHERE id = ?", (session_id,))
        return json.loads(rows[0][0]) if rows and rows[0][0] else None

    def notebook_of(self, session_id: str) -> str | None:
        """The notebook a session belongs to (the sidebar says where a question waits)."""
        rows = self._query("SELECT notebook FROM sessions WHERE id = ?", (session_id,))
        return str(rows[0][0]) if rows else None

    # turns -------------------------------------------------------------------------------
    def record_turn_start(
        self,
        turn_id: str,
        session_id: str,
        question: str,
        model: str,
        cell_id: str | None,
        owner: str | None = None,
        shown: str | None = None,
    ) -> None:
        with self._tx() as c:
            # A resumed turn keeps its row; it is simply running again, maybe in another process.
            c.execute(
                "INSERT INTO turns"
                " (id, session_id, cell_id, question, model, status, created_at, owner, shown)"
                " VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)"
                " ON CONFLICT(id) DO UPDATE SET status = 'running', finished_at = NULL,"
                " owner = excluded.owner",
                (turn_id, session_id, cell_id, question, model, time.time(), owner, shown),
            )

    def interrupt_orphaned_turns(self, live_owners: Iterable[str]) -> int:
        """Turns left 'running' by a process that is gone become 'interrupted'."""
        live = list(live_owners)
        marks = ", ".join("?" for _ in live)
        with self._tx() as c:
            cursor = c.execute(
                "UPDATE turns SET status = 'interrupted', finished_at = ?"
                f" WHERE status = 'running' AND (owner IS NULL OR owner NOT IN ({marks}))",
                (time.time(), *live),
            )
            return int(cursor.rowcount)

    def record_turn_end(
        self, turn_id: str, status: str, answer: str | None, error: str | None = None
    ) -> None:
        """When the turn's last message (saved just before) is the answer, the row points at it
        instead of holding a second copy (issue 28: an answer was stored four times)."""
        with self._tx() as c:
            at = None
            if answer:
                last = c.execute(
                    "SELECT m.idx, m.message FROM turns t JOIN messages m"
                    " ON m.session_id = t.session_id AND m.turn_id = t.id"
                    " WHERE t.id = ? ORDER BY m.idx DESC LIMIT 1",
                    (turn_id,),
                ).fetchone()
                if last is not None and json.loads(last[1]).get("content") == answer:
                    at, answer = last[0], None
            c.execute(
                "UPDATE turns SET status = ?, answer = ?, answer_at = ?, error = ?,"
                " finished_at = ? WHERE id = ?",
                (status, answer, at, error, time.time(), turn_id),
            )

    def get_turn(self, turn_id: str) -> TurnRow | None:
        rows = self._query(_TURN_ROWS + " WHERE t.id = ?", (turn_id,))
        return _turn_row(rows[0]) if rows else None

    def turns(self, session_id: str) -> list[TurnRow]:
        """The conversation's turns, oldest first; a regenerated one gives way to its new turn."""
        rows = self._query(
            _TURN_ROWS + " WHERE t.session_id = ? AND t.replaced_by IS NULL ORDER BY t.created_at",
            (session_id,),
        )
        return [_turn_row(r) for r in rows]

    def running_turns(self, session_id: str) -> list[tuple[str, str | None]]:
        """The conversation's turns marked running, in any process: (id, owner)."""
        rows = self._query(
            "SELECT id, owner FROM turns WHERE session_id = ? AND status = 'running'",
            (session_id,),
        )
        return [(r[0], r[1]) for r in rows]

    def replace_turn(self, turn_id: str, by: str | None) -> None:
        """Mark a turn and its messages as replaced by the turn ``by`` (None: undo): they leave
        the history and the turn list but stay in the store, the provenance of what was shown."""
        with self._tx() as c:
            c.execute("UPDATE turns SET replaced_by = ? WHERE id = ?", (by, turn_id))
            c.execute(
                f"UPDATE messages SET replaced_by = ? WHERE {_OF_TURN}", (by, turn_id, turn_id)
            )

    def turn_messages(self, turn_id: str) -> list[Message]:
        """The messages a turn added to its conversation, in order."""
        rows = self._query(
            f"SELECT message FROM messages WHERE {_OF_TURN} ORDER BY idx", (turn_id, turn_id)
        )
        return [json.loads(r[0]) for r in rows]

    def delete_session(self, session_id: str) -> bool:
        """Tombstone a conversation: no read lists it or its turns again. False when there is
        no such live conversation."""
        with self._tx() as c:
            cur = c.execute(
                "UPDATE sessions SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL",
                (str(time.time()), session_id),
            )
            return cur.rowcount > 0

    def answer_of(self, turn_id: str) -> str | None:
        row = self.get_turn(turn_id)
        return row.answer if row is not None else None

    # events ------------------------------------------------------------------------------
    def append_events(self, rows: Iterable[EventRow]) -> None:
        from deeptutor_jupyter.store.event_rows import coalesce, pack

        rows = coalesce(rows)  # a run of streamed text is one row (store/event_rows.py)
        with self._tx() as c:
            rows = [self._done_without_answer(c, row) for row in rows]
            c.executemany(
                # Never REPLACE: a seq that repeats is a bug to surface, not history to overwrite.
                "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
                [(t, s, typ, pack(d), ts) for t, s, typ, d, ts in rows],
            )

    @staticmethod
    def _done_without_answer(c: CleanWrites, row: EventRow) -> EventRow:
        """A ``done`` event whose answer is the turn's saved answer keeps a reference to it, not
        a copy; ``events`` puts the answer back, so every reader of ``done.answer`` is served."""
        turn_id, seq, kind, data, ts = row
        if kind != "done" or not data.get("answer"):
            return row
        found = c.execute(_TURN_ROWS + " WHERE t.id = ?", (turn_id,)).fetchone()
        if found is None or _turn_row(found).answer != data["answer"]:
            return row
        rest = {k: v for k, v in data.items() if k != "answer"}
        return (turn_id, seq, kind, {**rest, ANSWER_REF: True}, ts)

    def _with_answers(self, turn_id: str, rows: list[Any]) -> list[Any]:
        for i, (seq, kind, data, *more) in enumerate(rows):
            if kind == "done" and data.pop(ANSWER_REF, False):
                rows[i] = (seq, kind, {**data, "answer": self.answer_of(turn_id) or ""}, *more)
        return rows

    def last_seq(self, turn_id: str) -> int:
        rows = self._query("SELECT COALESCE(MAX(seq), 0) FROM events WHERE turn_id = ?", (turn_id,))
        return int(rows[0][0])

    def events(self, turn_id: str, after_seq: int = 0) -> list[tuple[int, str, dict[str, Any]]]:
        rows = self._query(
            "SELECT seq, type, data FROM events WHERE turn_id = ? AND seq > ? ORDER BY seq",
            (turn_id, after_seq),
        )
        from deeptutor_jupyter.store.event_rows import replay, unpack

        return self._with_answers(
            turn_id, list(replay(((s, t, unpack(d)) for s, t, d in rows), after_seq))
        )

    def events_with_time(
        self, turn_id: str, after_seq: int = 0
    ) -> list[tuple[int, str, dict[str, Any], float]]:
        rows = self._query(
            "SELECT seq, type, data, ts FROM events WHERE turn_id = ? AND seq > ? ORDER BY seq",
            (turn_id, after_seq),
        )
        from deeptutor_jupyter.store.event_rows import replay, unpack

        return self._with_answers(
            turn_id, list(replay(((s, t, unpack(d), ts) for s, t, d, ts in rows), after_seq))
        )

    # pending interactions and paused turns ------------------------------------------------
    def add_pending(self, row: PendingRow, state: dict[str, Any] | None) -> None:
        """The question and the paused turn are saved together, or neither is."""
        with self._tx() as c:
            c.execute(
                f"INSERT INTO pending ({_PENDING_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                    row.owner,
                    json.dumps(row.place, ensure_ascii=False) if row.place else None,
                    row.kind,
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
        self,
        request_id: str,
        status: str,
        result: dict[str, Any],
        answered_at: float,
        *,
        was: str = "pending",
    ) -> bool:
        """Consume a pending request; False when it was no longer ``was`` (answered elsewhere).

        The one consume-once rule of every kind: a quiz is first held (``grading``) by the
        process that grades it, then resolved from ``grading``.
        """
        with self._tx() as c:
            cursor = c.execute(
                "UPDATE pending SET status = ?, result = ?, answered_at = ?"
                " WHERE request_id = ? AND status = ?",
                (status, json.dumps(result, ensure_ascii=False), answered_at, request_id, was),
            )
            return cursor.rowcount == 1

    def hold_pending(self, request_id: str) -> bool:
        """pending -> grading, once: the submitter that wins grades; False for every other."""
        with self._tx() as c:
            cursor = c.execute(
                "UPDATE pending SET status = 'grading', answered_at = ?"
                " WHERE request_id = ? AND status = 'pending'",
                (time.time(), request_id),
            )
            return cursor.rowcount == 1

    def release_pending(self, request_id: str) -> None:
        """grading -> pending: grading could not finish; the learner may submit again."""
        with self._tx() as c:
            c.execute(
                "UPDATE pending SET status = 'pending', answered_at = NULL"
                " WHERE request_id = ? AND status = 'grading'",
                (request_id,),
            )

    def answered_call(self, session_id: str, tool_call_id: str) -> PendingRow | None:
        """The row of the deferred call ``tool_call_id`` of this conversation, whatever its
        status (a confirmation form the tutor asked before editing a cell)."""
        rows = self._query(
            f"SELECT {_PENDING_COLUMNS} FROM pending WHERE session_id = ? AND tool_call_id = ?"
            " ORDER BY created_at DESC LIMIT 1",
            (session_id, tool_call_id),
        )
        return PendingRow.from_row(rows[0]) if rows else None

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
        rows = self._query(
            "SELECT id FROM sessions WHERE notebook = ? AND deleted_at IS NULL", (notebook,)
        )
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

    def drop_turn_state(self, *request_ids: str) -> None:
        if not request_ids:
            return
        with self._tx() as c:
            c.executemany(
                "DELETE FROM turn_states WHERE request_id = ?", [(r,) for r in request_ids]
            )

    def question_states(self, request_ids: Iterable[str]) -> dict[str, QuestionState]:
        """Where these questions and their turns stand; what a waiting owner and an open card
        elsewhere poll."""
        ids = list(request_ids)
        if not ids:
            return {}
        rows = self._query(
            "SELECT p.request_id, p.status, p.result, p.answered_at, t.status FROM pending p"
            " LEFT JOIN turns t ON t.id = p.turn_id"
            f" WHERE p.request_id IN ({', '.join('?' for _ in ids)})",
            ids,
        )
        return {
            r: QuestionState(st, json.loads(res) if res else None, at, turn)
            for r, st, res, at, turn in rows
        }

    def claim_pending(self, request_id: str, owner: str, place: dict[str, Any] | None) -> None:
        """A process that resumes a question's turn becomes its owner (and its place)."""
        with self._tx() as c:
            c.execute(
                "UPDATE pending SET owner = ?, place = ? WHERE request_id = ?",
                (owner, json.dumps(place, ensure_ascii=False) if place else None, request_id),
            )

    def reopen_unfinished(self, live_owners: Iterable[str]) -> list[str]:
        """Questions answered whose turn never checkpointed again (its process died first) are
        answerable again; the answer given stays in ``result`` so it is not lost."""
        live = list(live_owners)
        marks = ", ".join("?" for _ in live)
        with self._tx() as c:
            rows = c.execute(
                "SELECT p.request_id FROM pending p JOIN turn_states s USING (request_id)"
                " WHERE p.status = 'answered'"
                f" AND (p.owner IS NULL OR p.owner NOT IN ({marks}))"
                " AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = p.turn_id"
                " AND t.status IN ('done', 'error', 'cancelled'))",
                live,
            ).fetchall()
            ids = [r[0] for r in rows]
            c.executemany(
                "UPDATE pending SET status = 'pending', answered_at = NULL WHERE request_id = ?",
                [(r,) for r in ids],
            )
            return ids

    # processes that own waiting turns ------------------------------------------------------
    def register_owner(self, owner: OwnerRow) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO owners (id, pid, host, label, heartbeat, started)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (owner.id, owner.pid, owner.host, owner.label, owner.heartbeat, owner.started),
            )

    def owners(self) -> list[OwnerRow]:
        rows = self._query("SELECT id, pid, host, label, heartbeat, started FROM owners")
        return [OwnerRow(*r) for r in rows]

    def forget_owners(self, owner_ids: Iterable[str]) -> None:
        with self._tx() as c:
            c.executemany("DELETE FROM owners WHERE id = ?", [(o,) for o in owner_ids])

    # conversation history ----------------------------------------------------------------
    def append_messages(self, session_id: str, turn_id: str, messages: Iterable[Message]) -> None:
        with self._tx() as c:
            (start,) = c.execute(
                "SELECT COALESCE(MAX(idx) + 1, 0) FROM messages WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            c.executemany(
                "INSERT INTO messages (session_id, idx, turn_id, message) VALUES (?, ?, ?, ?)",
                [
                    (session_id, start + i, turn_id, json.dumps(m, ensure_ascii=False))
                    for i, m in enumerate(messages)
                ],
            )

    def history(self, session_id: str) -> list[Message]:
        rows = self._query(
            "SELECT message FROM messages WHERE session_id = ? AND replaced_by IS NULL"
            " ORDER BY idx",
            (session_id,),
        )
        return [json.loads(r[0]) for r in rows]


EventRow = tuple[str, int, str, dict[str, Any], float]
# A turn's messages, found through the messages' key (session_id, idx), not a scan of every one.
_OF_TURN = "session_id = (SELECT session_id FROM turns WHERE id = ?) AND turn_id = ?"
ANSWER_REF = "_answer_of_turn"  # a saved done event whose answer is the turn's saved answer

# A turn's answer is in turns.answer (older stores, or an answer that is no message's content)
# or in the message answer_at points at.
_TURN_ROWS = (
    "SELECT t.id, t.session_id, t.cell_id, t.question, t.model, t.status, t.answer, t.error,"
    " t.created_at, t.finished_at, t.shown, m.message FROM turns t LEFT JOIN messages m"
    " ON t.answer_at IS NOT NULL AND m.session_id = t.session_id AND m.idx = t.answer_at"
)


def _turn_row(row: tuple[Any, ...]) -> TurnRow:
    *fields, message = row
    if fields[6] is None and message is not None:
        fields[6] = json.loads(message).get("content")
    return TurnRow(*fields)


# Version 3 renamed the camelCase fields of the ask_user and quiz events (and of the saved
# question) to the events' one style.
_RENAMED_FIELDS = {
    "toolCallId": "tool_call_id",
    "sessionId": "session_id",
    "allowCustom": "allow_custom",
    "submitLabel": "submit_label",
    "expiresAt": "expires_at",
    "customInput": "custom_input",
}
_RENAMED_IN = ("user_input_required", "user_input_resolved", "quiz_required", "quiz_resolved")


def _renamed(text: str) -> str | None:
    data = json.loads(text)
    if not isinstance(data, dict) or not any(k in data for k in _RENAMED_FIELDS):
        return None
    return json.dumps({_RENAMED_FIELDS.get(k, k): v for k, v in data.items()}, ensure_ascii=False)


def _migrate(conn: sqlite3.Connection) -> None:
    """What a state.db an older version made needs: added columns, renamed event fields."""
    for table, columns in _ADDED_COLUMNS.items():
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        for column in columns:
            if column not in have:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
    found = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if found is not None and int(found[0]) >= SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        marks = ", ".join("?" for _ in _RENAMED_IN)
        rows = conn.execute(
            f"SELECT turn_id, seq, data FROM events WHERE type IN ({marks})", _RENAMED_IN
        ).fetchall()
        for turn_id, seq, data in rows:
            if (new := _renamed(data)) is not None:
                conn.execute(
                    "UPDATE events SET data = ? WHERE turn_id = ? AND seq = ?", (new, turn_id, seq)
                )
        for request_id, body in conn.execute("SELECT request_id, payload FROM pending").fetchall():
            if (new := _renamed(body)) is not None:
                conn.execute(
                    "UPDATE pending SET payload = ? WHERE request_id = ?", (new, request_id)
                )
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _store_error(exc: BaseException, path: Path) -> StoreError:
    import errno

    text = _explain(exc, path)
    full = "full" in str(exc) or getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT)
    return DiskFullError(text) if full else StoreError(text)


def _explain(exc: BaseException, path: Path) -> str:
    import errno

    text = str(exc)
    code = getattr(exc, "errno", None)
    if "full" in text or code in (errno.ENOSPC, errno.EDQUOT):
        return f"The disk holding {path} is full; free some space and run the cell again ({text})."
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{path} cannot be written ({text}); check the folder's permissions."
    if "unable to open" in text:
        return f"Could not open {path} ({text}); check that its folder exists and is writable."
    if "readonly" in text or "read-only" in text:
        return f"{path} is read-only; this turn could not be saved ({text})."
    if "locked" in text:
        return f"{path} stayed locked by another process; this turn could not be saved ({text})."
    return f"Could not write {path}: {text}"
