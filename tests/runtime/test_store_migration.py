"""A state.db written before the events' one naming style (schema version 2) is upgraded in place
on open: the ask_user and quiz events and the saved questions read with snake_case fields, so a
question asked before the upgrade can still be shown and answered; what the model read (the tool
result) is left as it was."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from deeptutor_jupyter.agent.events import parse_event
from deeptutor_jupyter.interaction.schema import AskUserPayload
from deeptutor_jupyter.store.db import SCHEMA_VERSION, Store

LEGACY_PAYLOAD = {
    "id": "ask_1",
    "toolCallId": "call_1",
    "sessionId": "nb-1",
    "title": "Which topic?",
    "mode": "single",
    "options": [{"id": "eig", "label": "Eigenvalues"}],
    "allowCustom": True,
    "submitLabel": "Go on",
    "resumable": True,
    "expiresAt": 2e9,
}
LEGACY_RESULT = {"selections": ["eig"], "customInput": "", "cancelled": False}


def legacy_store(path: Path) -> None:
    Store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        conn.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
            ("turn-1", 1, "user_input_required", json.dumps(LEGACY_PAYLOAD), 1.0),
        )
        resolved = {"id": "ask_1", "toolCallId": "call_1", **LEGACY_RESULT}
        conn.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
            ("turn-1", 2, "user_input_resolved", json.dumps(resolved), 2.0),
        )
        conn.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
            ("turn-1", 3, "content", json.dumps({"text": "toolCallId stays text"}), 3.0),
        )
        conn.execute(
            "INSERT INTO pending (request_id, session_id, turn_id, tool_call_id, payload, status,"
            " created_at, expires_at, answered_at, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                "ask_1",
                "nb-1",
                "turn-1",
                "call_1",
                json.dumps(LEGACY_PAYLOAD),
                "answered",
                1.0,
                2e9,
                2.0,
                json.dumps(LEGACY_RESULT),
            ),
        )


def test_an_older_store_reads_in_the_one_style_after_open(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    legacy_store(path)
    store = Store(path)
    try:
        events = store.events("turn-1")
        for seq, kind, data in events[:2]:
            parse_event({"type": kind, "seq": seq, "turn_id": "turn-1", "ts": 1.0, **data})
        (_, _, required), (_, _, resolved), (_, _, content) = events
        assert required["tool_call_id"] == "call_1" and required["allow_custom"] is True
        assert "toolCallId" not in required and "expiresAt" not in required
        assert resolved["custom_input"] == "" and resolved["tool_call_id"] == "call_1"
        assert content == {"text": "toolCallId stays text"}
        row = store.get_pending("ask_1")
        assert row is not None
        question = AskUserPayload.model_validate(row.payload)
        assert question.submit_label == "Go on" and question.session_id == "nb-1"
        # The tool result is the model's contract: untouched.
        assert row.result == LEGACY_RESULT
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION),)


def test_opening_again_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    legacy_store(path)
    Store(path).close()
    with sqlite3.connect(path) as conn:
        before = conn.execute("SELECT * FROM events ORDER BY seq").fetchall()
    Store(path).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT * FROM events ORDER BY seq").fetchall() == before


def test_a_store_without_conversation_names_gains_them_and_keeps_its_sessions(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as conn:  # the sessions table as versions before names made it
        conn.execute(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, notebook TEXT NOT NULL,"
            " created_at REAL NOT NULL, updated_at REAL NOT NULL)"
        )
        conn.execute("INSERT INTO sessions VALUES ('nb-old', 'week1.ipynb', 1.0, 1.0)")
    store = Store(path)
    try:
        assert store.sessions_of("week1.ipynb") == ["nb-old"]
        assert store.session_title("nb-old") is None
        assert store.rename_session("nb-old", " Week 1 ")
        assert store.session_title("nb-old") == "Week 1"
        assert not store.rename_session("nb-nothere", "x")
        store.ensure_session("nb-new", "week1.ipynb")  # a new row beside the added column
        assert sorted(store.sessions_of("week1.ipynb")) == ["nb-new", "nb-old"]
        assert store.session_title("nb-old") == "Week 1"  # ensure_session keeps the name
        assert store.rename_session("nb-old", "   ")
        assert store.session_title("nb-old") is None
        # The model and knowledge bases chosen in the panel (runtime/choice.py) are kept too.
        assert store.session_choice("nb-old") is None
        assert store.set_session_choice("nb-old", {"model": "gpt-4o", "kbs": ["linalg"]})
        assert store.session_choice("nb-old") == {"model": "gpt-4o", "kbs": ["linalg"]}
        assert not store.set_session_choice("nb-nothere", {"model": "x"})
    finally:
        store.close()


OLD_PENDING = """
CREATE TABLE pending (
    request_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, turn_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL, payload TEXT NOT NULL, status TEXT NOT NULL,
    created_at REAL NOT NULL, expires_at REAL NOT NULL, answered_at REAL, result TEXT,
    owner TEXT, place TEXT
);
CREATE TABLE quizzes (
    quiz_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, turn_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL, kind TEXT NOT NULL, objective TEXT NOT NULL, spec TEXT NOT NULL,
    status TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL, answered_at REAL,
    result TEXT, state TEXT
);
"""
OLD_QUIZ = {
    "title": "Squares",
    "objective": "squares",
    "questions": [
        {
            "id": "q1",
            "kind": "choice",
            "prompt": "2 squared?",
            "options": [{"id": "a", "label": "2"}, {"id": "b", "label": "4"}],
            "answer": ["b"],
            "explanation": "OLD-SECRET",
        }
    ],
}


def test_a_store_with_quizzes_kept_apart_lists_them_as_pending_interactions(
    tmp_path: Path,
) -> None:
    """Before the one pending table, an open quiz and its paused turn lived only in ``quizzes``:
    after open, it is a pending row of kind ``quiz`` (public form only), its turn in
    ``turn_states``; a question keeps its kind; opening again adds nothing."""
    from deeptutor_jupyter.interaction.audit import AuditLog
    from deeptutor_jupyter.interaction.pending import PendingCalls
    from deeptutor_jupyter.interaction.quiz import QuizCoordinator
    from deeptutor_jupyter.store.learning import LearningStore

    path = tmp_path / "state.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_PENDING)
        conn.execute(
            "INSERT INTO pending VALUES ('ask_1', 'nb-1', 'turn-1', 'call_1', ?, 'pending',"
            " 1.0, 2e9, NULL, NULL, NULL, NULL)",
            (json.dumps({"id": "ask_1", "title": "Which topic?", "mode": "text"}),),
        )
        for quiz_id, status in (("quiz_open", "pending"), ("quiz_done", "answered")):
            conn.execute(
                "INSERT INTO quizzes VALUES (?, 'nb-1', 'turn-2', 'call_q', 'tool', 'squares',"
                " ?, ?, 1.0, 2e9, NULL, NULL, ?)",
                (quiz_id, json.dumps({"quiz": OLD_QUIZ}), status, json.dumps({"version": 1})),
            )

    def open_all() -> list[Any]:
        store, learning = Store(path), LearningStore(path)
        try:
            quizzes = QuizCoordinator(learning, PendingCalls(store), AuditLog(tmp_path / "a"))
            quizzes.adopt_old_quizzes()
            return [
                (r.request_id, r.kind, r.tool_call_id, r.payload, store.turn_state(r.request_id))
                for r in store.pending_for(None)
            ]
        finally:
            store.close()
            learning.close()

    rows = open_all()
    assert [(r[0], r[1], r[4]) for r in rows] == [
        ("ask_1", "ask_user", None),
        ("quiz_open", "quiz", {"version": 1}),
    ]
    form = rows[1][3]
    assert form["id"] == "quiz_open" and form["questions"][0]["prompt"] == "2 squared?"
    assert "OLD-SECRET" not in json.dumps(form) and '"answer"' not in json.dumps(form)
    with sqlite3.connect(path) as conn:  # the turn is kept once, in turn_states
        assert conn.execute("SELECT state FROM quizzes WHERE quiz_id = 'quiz_open'").fetchone() == (
            None,
        )
    assert open_all() == rows
