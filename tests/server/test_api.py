"""The sidebar API in a real jupyter_server: who may call it, what it lists, and that an answer
goes through the coordinator's one door (consumed once, a foreign session refused)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from deeptutor_jupyter.memory import MemoryStore
from deeptutor_jupyter.memory.trace import TraceRecord
from deeptutor_jupyter.store.db import Store
from tests.server.conftest import ask, owner_coordinator

ROUTES = ["pending", "memory", "kbs", "traces", "mastery"]


def get(run: Any, jp_fetch: Any, route: str, **params: str) -> dict[str, Any]:
    response = run(jp_fetch("deeptutor", "api", route, params=params or None))
    assert response.code == 200
    return dict(json.loads(response.body))


def post_answer(run: Any, jp_fetch: Any, request_id: str, body: Any) -> tuple[int, dict[str, Any]]:
    try:
        response = run(
            jp_fetch(
                "deeptutor", "api", "pending", request_id, method="POST",
                body=body if isinstance(body, str) else json.dumps(body),
            )
        )  # fmt: skip
    except HTTPClientError as exc:
        assert exc.response is not None
        return exc.code, json.loads(exc.response.body)
    return response.code, json.loads(response.body)


def audit_lines(home: Path) -> list[dict[str, Any]]:
    path = home / "audit" / "interactions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("route", ROUTES)
def test_an_unauthenticated_request_is_refused(
    run: Any, route: str, jp_serverapp: Any, http_server_client: Any, jp_base_url: str, store: Store
) -> None:
    ask(store, "a.ipynb", session_id="nb-aaaaaa-1")
    response = run(
        http_server_client.fetch(f"{jp_base_url}deeptutor/api/{route}", raise_error=False)
    )
    assert response.code == 403
    assert b"Which way" not in response.body


def test_an_unauthenticated_answer_is_refused_and_changes_nothing(
    run: Any, jp_serverapp: Any, http_server_client: Any, jp_base_url: str, store: Store
) -> None:
    row = ask(store, "a.ipynb", session_id="nb-aaaaaa-1")
    response = run(
        http_server_client.fetch(
            f"{jp_base_url}deeptutor/api/pending/{row.request_id}",
            method="POST",
            body=json.dumps({"session_id": row.session_id, "selections": ["safe"]}),
            raise_error=False,
        )
    )
    assert response.code == 403
    assert store.get_pending(row.request_id).status == "pending"  # type: ignore[union-attr]


def test_pending_lists_the_waiting_questions_of_every_notebook(
    run: Any, jp_fetch: Any, store: Store, home: Path
) -> None:
    first = ask(store, "week1/a.ipynb", session_id="nb-aaaaaa-1")
    second = ask(store, "week2/b.ipynb", session_id="nb-bbbbbb-2", mode="multiple")
    answered = ask(store, "week2/b.ipynb", session_id="nb-bbbbbb-2")
    owner_coordinator(store, home).submit(answered.session_id, answered.request_id, ["fast"])

    pending = get(run, jp_fetch, "pending")["pending"]

    assert [(q["id"], q["notebook"], q["mode"]) for q in pending] == [
        (first.request_id, "week1/a.ipynb", "single"),
        (second.request_id, "week2/b.ipynb", "multiple"),
    ]
    assert pending[0]["session_id"] == "nb-aaaaaa-1"
    assert pending[0]["tool_call_id"] == first.tool_call_id
    assert [o["id"] for o in pending[0]["options"]] == ["safe", "fast"]


def test_an_answer_is_consumed_once(run: Any, jp_fetch: Any, store: Store, home: Path) -> None:
    row = ask(store, "a.ipynb", session_id="nb-aaaaaa-1")
    # The kernel that owns the question takes the first answer (from its card, say).
    owner_coordinator(store, home).submit(row.session_id, row.request_id, ["safe"])

    code, body = post_answer(
        run, jp_fetch, row.request_id, {"session_id": row.session_id, "selections": ["fast"]}
    )

    assert (code, body["code"]) == (409, "duplicate")
    assert "already answered" in body["message"]
    kept = store.get_pending(row.request_id)
    assert kept is not None and kept.result is not None
    assert kept.result["selections"] == ["safe"]
    assert audit_lines(home)[-1]["reason"] == "duplicate"
    assert get(run, jp_fetch, "pending")["pending"] == []


def test_a_foreign_session_is_refused(run: Any, jp_fetch: Any, store: Store, home: Path) -> None:
    row = ask(store, "a.ipynb", session_id="nb-aaaaaa-1")
    ask(store, "b.ipynb", session_id="nb-bbbbbb-2")

    code, body = post_answer(
        run, jp_fetch, row.request_id, {"session_id": "nb-bbbbbb-2", "selections": ["safe"]}
    )

    assert (code, body["code"]) == (403, "foreign_session")
    assert store.get_pending(row.request_id).status == "pending"  # type: ignore[union-attr]
    assert audit_lines(home)[-1]["reason"] == "foreign_session"


def test_an_answer_nobody_can_continue_is_refused_and_the_question_stays(
    run: Any, jp_fetch: Any, store: Store
) -> None:
    # No live kernel waits on it in this process and no saved state can resume it here: the
    # server says so instead of consuming an answer that would go nowhere.
    row = ask(store, "a.ipynb", session_id="nb-aaaaaa-1")

    code, body = post_answer(
        run, jp_fetch, row.request_id, {"session_id": row.session_id, "selections": ["safe"]}
    )

    assert (code, body["code"]) == (409, "not_resumable")
    assert store.get_pending(row.request_id).status == "pending"  # type: ignore[union-attr]
    assert [q["id"] for q in get(run, jp_fetch, "pending")["pending"]] == [row.request_id]


def test_an_answer_to_a_live_kernels_question_is_taken_and_says_where_it_continues(
    run: Any, jp_fetch: Any, store: Store, home: Path
) -> None:
    from deeptutor_jupyter.interaction.owners import Owner, register

    kernel = Owner.this_process("a.ipynb")  # a live process waits on it (this one's pid)
    register(store, kernel)
    place = {"notebook": "a.ipynb", "cell": "[7]"}
    row = ask(store, "a.ipynb", session_id="nb-aaaaaa-1", owner=kernel.id, place=place)
    listed = get(run, jp_fetch, "pending")["pending"]
    assert listed[0]["resumable"] is True and listed[0]["continues_in"] == place

    code, body = post_answer(
        run, jp_fetch, row.request_id, {"session_id": row.session_id, "selections": ["safe"]}
    )

    assert code == 200 and body["continues_in"] == place
    kept = store.get_pending(row.request_id)
    assert kept is not None and kept.status == "answered"  # the owner's poll picks it up
    assert kept.result == {"selections": ["safe"], "customInput": "", "cancelled": False}


def test_a_key_typed_into_an_answer_from_the_panel_is_stored_redacted(
    run: Any, jp_fetch: Any, store: Store, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.interaction.owners import Owner, register

    key = "sk-panel-only-3d9b7e51"  # registered by the server's own settings, nowhere else
    monkeypatch.setenv("DEEPTUTOR_API_KEY", key)
    kernel = Owner.this_process("a.ipynb")
    register(store, kernel)
    row = ask(store, "a.ipynb", session_id="nb-aaaaaa-1", mode="text", owner=kernel.id)
    answer = {"session_id": row.session_id, "selections": [], "custom_input": f"mine: {key}"}

    code, _body = post_answer(run, jp_fetch, row.request_id, answer)

    assert code == 200
    kept = store.get_pending(row.request_id)
    assert kept is not None and kept.result is not None
    assert kept.result["customInput"] == "mine: [redacted]"
    store.close()
    raw = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    assert key.encode() not in raw and key[::-1].encode() not in raw


@pytest.mark.parametrize(
    ("body", "status", "code", "words"),
    [
        ("{not json", 400, "bad_request", "not valid JSON"),
        ({"selections": ["safe"]}, 400, "bad_request", "session_id"),
        ({"session_id": "nb-aaaaaa-1", "selections": "safe"}, 400, "bad_request", "list"),
        ({"session_id": "nb-aaaaaa-1", "selections": ["nope"]}, 400, "invalid", "Not an option"),
        ({"session_id": "nb-aaaaaa-1", "cancelled": "yes"}, 400, "bad_request", "true or false"),
    ],
)
def test_a_bad_answer_gets_a_clear_error_and_loses_nothing(
    run: Any, jp_fetch: Any, store: Store, body: Any, status: int, code: str, words: str
) -> None:
    row = ask(store, "a.ipynb", session_id="nb-aaaaaa-1")

    got_status, got = post_answer(run, jp_fetch, row.request_id, body)

    assert (got_status, got["code"]) == (status, code)
    assert words in got["message"]
    assert store.get_pending(row.request_id).status == "pending"  # type: ignore[union-attr]


def test_an_unknown_question_is_404(run: Any, jp_fetch: Any, store: Store) -> None:
    code, body = post_answer(run, jp_fetch, "ask_nothere", {"session_id": "nb-x"})
    assert (code, body["code"]) == (404, "unknown")


def test_memory_knowledge_and_traces_read_the_learners_files(
    run: Any, jp_fetch: Any, home: Path
) -> None:
    memory = MemoryStore(home)
    memory.overwrite("L3", "profile", "# Profile\n\n## Style\n\n- Likes worked examples.\n")
    memory.emit(
        TraceRecord(
            trace_id="t_1", session_id="nb-a", turn_id="turn-1", model="m", started_at=1.0,
            finished_at=2.0, question="What is a matrix?", answer_summary="A grid of numbers.",
        )
    )  # fmt: skip

    documents = get(run, jp_fetch, "memory")["documents"]
    traces = get(run, jp_fetch, "traces", limit="5")["traces"]
    kbs = get(run, jp_fetch, "kbs")["kbs"]

    profile = next(d for d in documents if (d["layer"], d["key"]) == ("L3", "profile"))
    assert "Likes worked examples." in profile["text"]
    assert not profile["empty"]
    assert [t["question"] for t in traces] == ["What is a matrix?"]
    assert kbs == []


def test_a_bad_trace_limit_is_refused_in_words(run: Any, jp_fetch: Any, home: Path) -> None:
    with pytest.raises(HTTPClientError) as caught:
        run(jp_fetch("deeptutor", "api", "traces", params={"limit": "lots"}))
    assert caught.value.code == 400
    assert b"whole number" in caught.value.response.body  # type: ignore[union-attr]


def request(run: Any, jp_fetch: Any, method: str, *parts: str, body: Any = None) -> Any:
    try:
        response = run(
            jp_fetch(
                "deeptutor", "api", *parts, method=method,
                body=None if body is None else json.dumps(body),
                allow_nonstandard_methods=True,
            )
        )  # fmt: skip
    except HTTPClientError as exc:
        assert exc.response is not None
        return exc.code, json.loads(exc.response.body)
    return response.code, json.loads(response.body)


def test_a_memory_document_is_edited_and_a_bad_edit_saves_nothing(
    run: Any, jp_fetch: Any, home: Path
) -> None:
    good = "# Preferences\n\n## Style\n\n- Answers in English.\n"
    code, body = request(run, jp_fetch, "PUT", "memory", "L3", "preferences", body={"text": good})
    assert code == 200
    assert "Answers in English." in MemoryStore(home).read_text("L3", "preferences")
    assert any("Answers in English." in d["text"] for d in body["documents"])

    bad = "- a bullet before any section\n"
    code, body = request(run, jp_fetch, "PUT", "memory", "L3", "preferences", body={"text": bad})
    assert (code, body["code"]) == (400, "invalid")
    assert "line 1" in body["message"]
    assert "Answers in English." in MemoryStore(home).read_text("L3", "preferences")

    code, body = request(run, jp_fetch, "PUT", "memory", "L3", "secrets", body={"text": good})
    assert code == 400 and "L3 has" in body["message"]


def test_a_knowledge_base_is_removed_and_its_sources_stay(
    run: Any, jp_fetch: Any, home: Path, tmp_path: Path
) -> None:
    from deeptutor_jupyter.knowledge.base import KnowledgeBase

    notes = tmp_path / "notes.md"
    notes.write_text("# Eigenvalues\n\nAn eigenvalue scales its eigenvector.\n")
    KnowledgeBase(home, "linalg").add_sources([notes])
    assert [kb["name"] for kb in get(run, jp_fetch, "kbs")["kbs"]] == ["linalg"]

    code, body = request(run, jp_fetch, "DELETE", "kbs", "linalg")

    assert (code, body["kbs"]) == (200, [])
    assert notes.exists()
    code, body = request(run, jp_fetch, "DELETE", "kbs", "linalg")
    assert (code, body["code"]) == (404, "unknown")
    code, body = request(run, jp_fetch, "DELETE", "kbs", "bad name!")
    assert (code, body["code"]) == (400, "invalid")


@pytest.mark.parametrize(
    ("method", "path"),
    [("PUT", "memory/L3/profile"), ("DELETE", "kbs/linalg"), ("PUT", "language")],
)
def test_an_unauthenticated_write_is_refused(
    run: Any, method: str, path: str, jp_serverapp: Any, http_server_client: Any,
    jp_base_url: str, home: Path,
) -> None:  # fmt: skip
    response = run(
        http_server_client.fetch(
            f"{jp_base_url}deeptutor/api/{path}", method=method,
            body='{"text": "# P\\n"}' if method == "PUT" else None,
            allow_nonstandard_methods=True, raise_error=False,
        )
    )  # fmt: skip
    assert response.code == 403
    assert MemoryStore(home).read_text("L3", "profile") == ""
    assert not (home / "jupyterlab-language").exists()


def test_pending_lists_open_quizzes_apart_with_their_public_form_only(
    run: Any, jp_fetch: Any, store: Store, home: Path
) -> None:
    """A quiz is a pending interaction too: listed for the Pending tab (answered over a kernel's
    comm, which grades it), never with its answers; the questions' list stays questions."""
    from deeptutor_jupyter.interaction.audit import AuditLog
    from deeptutor_jupyter.interaction.pending import PendingCalls
    from deeptutor_jupyter.interaction.quiz import QuizCoordinator
    from deeptutor_jupyter.learning.quiz import MakeQuizArgs
    from deeptutor_jupyter.store.learning import LearningStore

    question = ask(store, "week1/a.ipynb", session_id="nb-aaaaaa-1")
    learning = LearningStore(store.path)
    try:
        quizzes = QuizCoordinator(learning, PendingCalls(store), AuditLog(home / "audit" / "q"))
        quiz = MakeQuizArgs.model_validate(
            {
                "title": "Squares",
                "questions": [
                    {"id": "q1", "kind": "numeric", "prompt": "3 squared?", "answer": 9},
                    {"id": "q2", "kind": "short", "prompt": "Why?", "reference": "HIDDEN-REF"},
                ],
            }
        )
        row = quizzes.open_quiz("nb-aaaaaa-1", "turn-q", "call_q", "tool", quiz)
    finally:
        learning.close()

    listed = get(run, jp_fetch, "pending")

    assert [q["id"] for q in listed["pending"]] == [question.request_id]
    assert [(q["id"], q["notebook"], q["tool_call_id"]) for q in listed["quizzes"]] == [
        (row.quiz_id, "week1/a.ipynb", "call_q")
    ]
    assert [q["prompt"] for q in listed["quizzes"][0]["questions"]] == ["3 squared?", "Why?"]
    assert "HIDDEN-REF" not in json.dumps(listed) and '"answer"' not in json.dumps(listed)


def put_language(run: Any, jp_fetch: Any, body: str) -> tuple[int, dict[str, Any]]:
    try:
        response = run(jp_fetch("deeptutor", "api", "language", method="PUT", body=body))
    except HTTPClientError as exc:
        assert exc.response is not None
        return exc.code, json.loads(exc.response.body)
    return response.code, json.loads(response.body)


def test_jupyterlabs_language_reaches_the_kernels_settings(
    run: Any, jp_fetch: Any, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.config import resolve_settings

    monkeypatch.setenv("LANG", "en_US.UTF-8")
    assert put_language(run, jp_fetch, '{"language": "zh_CN"}') == (200, {"language": "zh"})
    assert resolve_settings().settings.language == "zh"  # what a kernel of this home reads
    code, refused = put_language(run, jp_fetch, '{"language": 7}')
    assert (code, refused["code"]) == (400, "bad_request")
    assert resolve_settings().settings.language == "zh"  # a bad report changes nothing
