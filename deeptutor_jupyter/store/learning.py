"""The learning tables of ``state.db``: quizzes, paths, mastery evidence, review cards.

Its own connection to the same file (WAL, busy timeout, like store/db.py), so the learning side
never reaches into the turn tables. A quiz row holds the whole quiz, answers included: the store
lives in the kernel, the browser only ever sees learning/quiz.py's ``public_view``. A quiz is
consumed once through its row in the one ``pending`` table (store/db.py), like every pause;
the status here is the learning record's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from deeptutor_jupyter.store.db import SQLiteFile

_SCHEMA = """
CREATE TABLE IF NOT EXISTS quizzes (
    quiz_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    kind TEXT NOT NULL,             -- tool (make_quiz) | review (%tutor review)
    objective TEXT NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL,           -- pending | answered | cancelled | expired (pending mirrors)
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    answered_at REAL,
    result TEXT,
    state TEXT                      -- before the one pending table: the paused turn (adopted)
);
CREATE INDEX IF NOT EXISTS quizzes_by_session ON quizzes (session_id, status);
CREATE TABLE IF NOT EXISTS learning_paths (
    path_id TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    spec TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS mastery_evidence (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    objective TEXT NOT NULL,
    quiz_id TEXT NOT NULL,
    question_id TEXT NOT NULL,
    score REAL NOT NULL,
    guess REAL NOT NULL,
    ts REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS evidence_by_objective ON mastery_evidence (objective, ts);
CREATE TABLE IF NOT EXISTS review_cards (
    card_id INTEGER PRIMARY KEY AUTOINCREMENT,
    objective TEXT NOT NULL,
    question TEXT NOT NULL,
    card TEXT NOT NULL,
    due REAL NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS cards_by_due ON review_cards (due);
CREATE TABLE IF NOT EXISTS review_log (
    card_id INTEGER NOT NULL,
    rating INTEGER NOT NULL,
    ts REAL NOT NULL,
    log TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class QuizRow:
    quiz_id: str
    session_id: str
    turn_id: str
    tool_call_id: str
    kind: str
    objective: str
    spec: dict[str, Any]
    status: str
    created_at: float
    expires_at: float
    answered_at: float | None
    result: dict[str, Any] | None


_QUIZ_COLUMNS = (
    "quiz_id, session_id, turn_id, tool_call_id, kind, objective, spec, status, created_at,"
    " expires_at, answered_at, result"
)


def _quiz(row: tuple[Any, ...]) -> QuizRow:
    values = list(row)
    values[6] = json.loads(values[6])
    values[11] = json.loads(values[11]) if values[11] else None
    return QuizRow(*values)


@dataclass(frozen=True)
class CardRow:
    card_id: int
    objective: str
    question: dict[str, Any]
    card: dict[str, Any]
    due: float
    created_at: float


class LearningStore(SQLiteFile):
    """The learning tables, in the learner's state.db beside the store's own."""

    SCHEMA = _SCHEMA

    # quizzes -----------------------------------------------------------------------------
    def add_quiz(self, row: QuizRow) -> None:
        """The quiz with its answers; its pending row (store/db.py) is what surfaces list."""
        with self._tx() as c:
            c.execute(
                f"INSERT INTO quizzes ({_QUIZ_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.quiz_id,
                    row.session_id,
                    row.turn_id,
                    row.tool_call_id,
                    row.kind,
                    row.objective,
                    json.dumps(row.spec, ensure_ascii=False),
                    row.status,
                    row.created_at,
                    row.expires_at,
                    None,
                    None,
                ),
            )

    def get_quiz(self, quiz_id: str) -> QuizRow | None:
        rows = self._query(f"SELECT {_QUIZ_COLUMNS} FROM quizzes WHERE quiz_id = ?", (quiz_id,))
        return _quiz(rows[0]) if rows else None

    def quizzes_not_listed(self) -> list[tuple[QuizRow, dict[str, Any] | None]]:
        """Open quizzes an older version saved without a pending row, with the paused turn it
        kept in ``state``: what QuizCoordinator.adopt_old_quizzes moves to the one table."""
        columns = ", ".join(f"q.{c.strip()}" for c in _QUIZ_COLUMNS.split(","))
        rows = self._query(
            f"SELECT {columns}, q.state FROM quizzes q WHERE q.status = 'pending'"
            " AND NOT EXISTS (SELECT 1 FROM pending p WHERE p.request_id = q.quiz_id)"
            " ORDER BY q.created_at"
        )
        out = []
        for r in rows:
            try:
                state = json.loads(r[-1]) if r[-1] else None
            except ValueError:  # a damaged state is a turn that cannot continue
                state = None
            out.append((_quiz(r[:-1]), state if isinstance(state, dict) else None))
        return out

    def forget_old_state(self, quiz_id: str) -> None:
        """Its paused turn moved to ``turn_states``: not kept twice."""
        with self._tx() as c:
            c.execute("UPDATE quizzes SET state = NULL WHERE quiz_id = ?", (quiz_id,))

    def finish_quiz(self, quiz_id: str, status: str, result: dict[str, Any]) -> None:
        """Record the outcome in the learning record (history, progress); the pending row
        (store/db.py) was consumed first, once."""
        with self._tx() as c:
            c.execute(
                "UPDATE quizzes SET status = ?, result = ?, answered_at = ? WHERE quiz_id = ?",
                (status, json.dumps(result, ensure_ascii=False), time.time(), quiz_id),
            )

    def quiz_history(self, limit: int = 50) -> list[QuizRow]:
        rows = self._query(
            f"SELECT {_QUIZ_COLUMNS} FROM quizzes WHERE status = 'answered' "
            "ORDER BY answered_at DESC LIMIT ?",
            (limit,),
        )
        return [_quiz(r) for r in rows]

    # paths -------------------------------------------------------------------------------
    def save_path(self, path_id: str, topic: str, spec: dict[str, Any]) -> None:
        now = time.time()
        with self._tx() as c:
            c.execute(
                "INSERT INTO learning_paths VALUES (?, ?, ?, ?, ?) ON CONFLICT(path_id) DO "
                "UPDATE SET spec = excluded.spec, topic = excluded.topic, updated_at = ?",
                (path_id, topic, json.dumps(spec, ensure_ascii=False), now, now, now),
            )

    def touch_path(self, path_id: str) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE learning_paths SET updated_at = ? WHERE path_id = ?", (time.time(), path_id)
            )

    def latest_path(self) -> tuple[str, dict[str, Any]] | None:
        """The path the learner worked on last, in any notebook."""
        rows = self._query(
            "SELECT path_id, spec FROM learning_paths ORDER BY updated_at DESC LIMIT 1"
        )
        return (rows[0][0], json.loads(rows[0][1])) if rows else None

    def path_by_topic(self, topic: str) -> tuple[str, dict[str, Any]] | None:
        rows = self._query(
            "SELECT path_id, spec FROM learning_paths WHERE lower(topic) = lower(?) "
            "ORDER BY updated_at DESC LIMIT 1",
            (topic,),
        )
        return (rows[0][0], json.loads(rows[0][1])) if rows else None

    # mastery evidence --------------------------------------------------------------------
    def add_evidence(self, rows: Iterable[tuple[str, str, str, float, float]]) -> None:
        """(objective, quiz_id, question_id, score, guess) rows, timestamped now."""
        now = time.time()
        with self._tx() as c:
            c.executemany(
                "INSERT INTO mastery_evidence (objective, quiz_id, question_id, score, guess, ts)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [(*r, now) for r in rows],
            )

    def evidence(self, objective: str | None = None) -> list[tuple[str, float, float, float]]:
        """(objective, score, guess, ts) in time order."""
        sql = "SELECT objective, score, guess, ts FROM mastery_evidence"
        params: tuple[Any, ...] = ()
        if objective is not None:
            sql, params = sql + " WHERE objective = ?", (objective,)
        return [(r[0], r[1], r[2], r[3]) for r in self._query(sql + " ORDER BY ts, id", params)]

    # review cards ------------------------------------------------------------------------
    def new_card_id(self, objective: str, question: dict[str, Any]) -> int:
        with self._tx() as c:
            cur = c.execute(
                "INSERT INTO review_cards (objective, question, card, due, created_at) "
                "VALUES (?, ?, '{}', 0, ?)",
                (objective, json.dumps(question, ensure_ascii=False), time.time()),
            )
            assert cur.lastrowid is not None
            return cur.lastrowid

    def save_card(
        self, card_id: int, card: dict[str, Any], due: float, rating: int, log: dict[str, Any]
    ) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE review_cards SET card = ?, due = ? WHERE card_id = ?",
                (json.dumps(card), due, card_id),
            )
            c.execute(
                "INSERT INTO review_log VALUES (?, ?, ?, ?)",
                (card_id, rating, time.time(), json.dumps(log)),
            )

    def cards(self, due_before: float | None = None, limit: int = 1000) -> list[CardRow]:
        sql = "SELECT card_id, objective, question, card, due, created_at FROM review_cards"
        sql += " WHERE card != '{}'"
        params: list[Any] = []
        if due_before is not None:
            sql += " AND due <= ?"
            params.append(due_before)
        rows = self._query(sql + " ORDER BY due, card_id LIMIT ?", [*params, limit])
        return [CardRow(r[0], r[1], json.loads(r[2]), json.loads(r[3]), r[4], r[5]) for r in rows]

    def get_card(self, card_id: int) -> CardRow | None:
        rows = self._query(
            "SELECT card_id, objective, question, card, due, created_at FROM review_cards "
            "WHERE card_id = ?",
            (card_id,),
        )
        if not rows:
            return None
        r = rows[0]
        return CardRow(r[0], r[1], json.loads(r[2]), json.loads(r[3]), r[4], r[5])

    def review_count(self, card_id: int) -> int:
        return int(
            self._query("SELECT count(*) FROM review_log WHERE card_id = ?", (card_id,))[0][0]
        )
