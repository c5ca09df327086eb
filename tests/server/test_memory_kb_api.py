"""The Memory and Knowledge tabs' writes in a real jupyter_server: delete entries and documents,
consolidate through a preview that Apply writes exactly (or refuses when stale), and knowledge
bases added from a path under the server root, indexed in a thread with progress, then removed."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from tornado.httpclient import HTTPClientError

from deeptutor_jupyter.knowledge.base import KnowledgeBase
from deeptutor_jupyter.memory import MemoryStore
from deeptutor_jupyter.memory.trace import TraceRecord
from deeptutor_jupyter.server import api_models
from deeptutor_jupyter.testing import FakeLLMServer, Reply

PROFILE = (
    "# Profile\n\n## Style\n\n"
    "- Likes worked examples. [^1] <!--m_aaaa1-->\n"
    "- Prefers short answers. [^1] <!--m_bbbb2-->\n\n"
    "---\n\n[^1]: t_1\n"
)


def reply_model(method: str, parts: tuple[str, ...]) -> type[BaseModel]:
    """The model (server/api_models.py, generated into the panel's contracts.ts) of a reply."""
    if parts[0] == "kbs":
        return api_models.JobReply if method == "POST" else api_models.KnowledgeState
    if parts[1:2] == ("previews",):
        return api_models.ApplyReply if method == "POST" else api_models.DiscardReply
    return api_models.PreviewReply if parts[-1] == "preview" else api_models.DocumentsReply


def call(run: Any, jp_fetch: Any, method: str, *parts: str, body: Any = None, **params: str):
    try:
        response = run(
            jp_fetch(
                "deeptutor", "api", *parts, method=method, params=params or None,
                body=None if body is None else json.dumps(body),
                allow_nonstandard_methods=True,
            )
        )  # fmt: skip
    except HTTPClientError as exc:
        assert exc.response is not None
        return exc.code, json.loads(exc.response.body)
    reply = json.loads(response.body)
    # Every answer is exactly what the panel's interfaces say, with no coercion on the way.
    reply_model(method, parts).model_validate(reply, strict=True)
    return response.code, reply


def trace(trace_id: str, question: str) -> TraceRecord:
    return TraceRecord(
        trace_id=trace_id, session_id="nb-a", turn_id=f"turn-{trace_id}", model="m",
        started_at=1.0, finished_at=2.0, question=question, answer_summary="…",
    )  # fmt: skip


@pytest.fixture
def memory(home: Path) -> MemoryStore:
    store = MemoryStore(home)
    store.emit(trace("t_1", "Show me an example of a matrix product."))
    store.overwrite("L3", "profile", PROFILE)
    return store


@pytest.fixture
def fake_llm(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The model the server reads from the learner's settings, as a kernel would."""
    with FakeLLMServer() as server:
        monkeypatch.setenv("DEEPTUTOR_PROVIDER", "custom")
        monkeypatch.setenv("DEEPTUTOR_BASE_URL", server.url)
        monkeypatch.setenv("DEEPTUTOR_MODEL", "fake-model")
        yield server


# ---- memory -----------------------------------------------------------------------------------


def test_memory_lists_each_entry_with_its_provenance(run: Any, jp_fetch: Any, memory: Any) -> None:
    code, body = call(run, jp_fetch, "GET", "memory")
    profile = next(d for d in body["documents"] if d["key"] == "profile")
    assert code == 200
    assert profile["entries"] == [
        {"id": "m_aaaa1", "section": "Style", "text": "Likes worked examples.", "refs": ["t_1"]},
        {"id": "m_bbbb2", "section": "Style", "text": "Prefers short answers.", "refs": ["t_1"]},
    ]


def test_an_entry_is_deleted_with_its_reason_logged(
    run: Any, jp_fetch: Any, memory: MemoryStore, home: Path
) -> None:
    code, body = call(
        run, jp_fetch, "DELETE", "memory", "L3", "profile", "m_aaaa1", reason="contradicted"
    )
    assert code == 200
    text = memory.read_text("L3", "profile")
    assert "Likes worked examples." not in text and "Prefers short answers." in text
    profile = next(d for d in body["documents"] if d["key"] == "profile")
    assert [e["id"] for e in profile["entries"]] == ["m_bbbb2"]
    logged = [
        json.loads(line) for line in (home / "memory" / "deletions.jsonl").read_text().splitlines()
    ]
    assert [(e["entry_id"], e["reason"]) for e in logged] == [("m_aaaa1", "contradicted")]

    code, body = call(run, jp_fetch, "DELETE", "memory", "L3", "profile", "m_aaaa1")
    assert (code, body["code"]) == (404, "unknown")
    code, body = call(run, jp_fetch, "DELETE", "memory", "L3", "profile", "m_bbbb2", reason="meh")
    assert (code, body["code"]) == (400, "invalid")
    assert "Prefers short answers." in memory.read_text("L3", "profile")  # a refusal keeps it


def test_a_whole_document_is_deleted(run: Any, jp_fetch: Any, memory: MemoryStore) -> None:
    memory.overwrite("L2", "quiz", "# Quiz\n\n## Mistakes\n\n- Mixes rows and columns.\n")
    code, body = call(run, jp_fetch, "DELETE", "memory", "L2", "quiz")
    assert (code, body["removed"]) == (200, 1)
    assert ("L2", "quiz") not in [(d["layer"], d["key"]) for d in body["documents"]]
    assert not memory.path("L2", "quiz").exists()
    code, body = call(run, jp_fetch, "DELETE", "memory", "L3", "profile")
    assert (code, body["removed"]) == (200, 2)
    assert memory.read_text("L3", "profile") == ""
    code, body = call(run, jp_fetch, "DELETE", "memory", "L3", "secrets")
    assert (code, body["code"]) == (400, "invalid")


def consolidation_reply(*ops: dict[str, Any]) -> Reply:
    return Reply(text=json.dumps({"ops": list(ops)}))


def test_a_preview_is_applied_exactly_without_a_second_model_call(
    run: Any, jp_fetch: Any, memory: MemoryStore, fake_llm: FakeLLMServer
) -> None:
    memory.emit(trace("t_2", "Can you go slower with proofs?"))
    fake_llm.extend(
        [
            consolidation_reply(
                {
                    "op": "add",
                    "section": "Pace",
                    "text": "Wants proofs step by step.",
                    "refs": ["t_2"],
                },
                {"op": "delete", "id": "m_bbbb2", "reason": "stale"},
                {
                    "op": "add",
                    "section": "Pace",
                    "text": "Cites a trace nobody has.",
                    "refs": ["t_9"],
                },
                {
                    "op": "edit",
                    "id": "m_aaaa1",
                    "text": "Likes examples with numbers.",
                    "refs": ["t_1"],
                },
            )
        ]
    )
    before = memory.read_text("L3", "profile")
    code, body = call(
        run, jp_fetch, "POST", "memory", "L3", "profile", "preview", body={"mode": "update"}
    )
    assert code == 200, body
    shown = body["preview"]
    assert memory.read_text("L3", "profile") == before  # a preview writes nothing
    assert shown["before"] == before
    assert "Wants proofs step by step." in shown["after"]
    assert "Prefers short answers." not in shown["after"]
    assert [r["reason"] for r in shown["rejected"]] == [
        "unknown reference 't_9': cite trace ids from the evidence"
    ]
    assert shown["changes"] == [
        {
            "kind": "add", "section": "Pace", "text": "Wants proofs step by step.",
            "old_text": "", "refs": ["t_2"], "reason": "",
        },
        {
            "kind": "delete", "section": "Style", "text": "Prefers short answers.",
            "old_text": "", "refs": [], "reason": "stale",
        },
        {
            "kind": "edit", "section": "Style", "text": "Likes examples with numbers.",
            "old_text": "Likes worked examples.", "refs": ["t_1"], "reason": "",
        },
    ]  # fmt: skip
    drawn = {t["trace_id"]: t["question"] for t in shown["traces"]}
    assert drawn == {
        "t_1": "Show me an example of a matrix product.",
        "t_2": "Can you go slower with proofs?",
    }
    calls = len(fake_llm.requests)
    assert calls == 1

    code, body = call(run, jp_fetch, "POST", "memory", "previews", shown["id"], body={})

    assert (code, body["applied"]) == (200, 3)
    assert memory.read_text("L3", "profile") == shown["after"]
    assert len(fake_llm.requests) == calls  # Apply never asks the model again
    assert memory.seen_traces("L3", "profile") == {"t_1", "t_2"}
    code, body = call(run, jp_fetch, "POST", "memory", "previews", shown["id"], body={})
    assert (code, body["code"]) == (404, "unknown")  # applied once


def test_a_stale_preview_is_refused_and_loses_nothing(
    run: Any, jp_fetch: Any, memory: MemoryStore
) -> None:
    # merge needs no model: two entries that say the same thing become one.
    memory.overwrite(
        "L3", "profile", PROFILE.replace("Prefers short answers.", "likes worked examples")
    )
    code, body = call(
        run, jp_fetch, "POST", "memory", "L3", "profile", "preview", body={"mode": "merge"}
    )
    assert code == 200 and body["preview"]["changed"]
    shown = body["preview"]
    edited = "# Profile\n\n## Style\n\n- Edited by hand meanwhile.\n"
    memory.overwrite("L3", "profile", edited)
    hand = memory.read_text("L3", "profile")

    code, body = call(run, jp_fetch, "POST", "memory", "previews", shown["id"], body={})

    assert (code, body["code"]) == (409, "stale")
    assert "changed since the preview" in body["message"]
    assert memory.read_text("L3", "profile") == hand

    code, body = call(run, jp_fetch, "DELETE", "memory", "previews", shown["id"])
    assert (code, body["discarded"]) == (200, True)
    code, body = call(run, jp_fetch, "POST", "memory", "previews", shown["id"], body={})
    assert (code, body["code"]) == (404, "unknown")


def test_a_preview_needing_a_model_says_so_when_none_is_set(
    run: Any, jp_fetch: Any, memory: MemoryStore
) -> None:
    code, body = call(
        run, jp_fetch, "POST", "memory", "L3", "profile", "preview", body={"mode": "update"}
    )
    assert (code, body["code"]) == (400, "no_model")
    assert body["message"].startswith("Consolidation needs a model")
    code, body = call(
        run, jp_fetch, "POST", "memory", "L3", "profile", "preview", body={"mode": "x"}
    )
    assert (code, body["code"]) == (400, "invalid")
    code, body = call(
        run, jp_fetch, "POST", "memory", "L3", "preferences", "preview", body={"mode": "merge"}
    )
    assert (code, body["code"]) == (400, "invalid")


# ---- knowledge bases --------------------------------------------------------------------------


def wait_for_job(run: Any, jp_fetch: Any, name: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        _, body = call(run, jp_fetch, "GET", "kbs")
        jobs = [j for j in body["jobs"] if j["name"] == name]
        if jobs and jobs[-1]["state"] != "running":
            return {"job": jobs[-1], "kbs": body["kbs"]}
        assert time.monotonic() < deadline, body
        time.sleep(0.1)


def test_a_folder_under_the_root_is_indexed_with_progress_listed_and_removed(
    run: Any, jp_fetch: Any, jp_root_dir: Path, home: Path
) -> None:
    course = jp_root_dir / "course" / "week1"
    course.mkdir(parents=True)
    (course / "rank.md").write_text("# Rank\n\nThe rank counts pivots.\n")
    (course / "det.md").write_text("# Determinant\n\nThe determinant scales volume.\n")

    code, body = call(run, jp_fetch, "POST", "kbs", body={"name": "week1", "path": "course/week1"})

    assert code == 202
    assert body["job"]["name"] == "week1" and body["job"]["path"] == "course/week1"
    finished = wait_for_job(run, jp_fetch, "week1")
    job = finished["job"]
    assert job["state"] == "done", job
    assert job["done"] == job["total"] > 0
    assert "2 added" in job["summary"]
    [kb] = finished["kbs"]
    assert (kb["name"], kb["files"]) == ("week1", 2)
    hit = KnowledgeBase(home, "week1").search("pivots")[0]
    assert (hit.chunk.path, hit.root) == ("course/week1/rank.md", str(jp_root_dir.resolve()))

    code, body = call(run, jp_fetch, "DELETE", "kbs", "week1")
    assert (code, body["kbs"]) == (200, [])
    assert (course / "rank.md").exists()


@pytest.mark.parametrize("path", ["../outside", "../../..", "course/../../outside"])
def test_a_path_outside_the_root_is_refused(
    run: Any, jp_fetch: Any, jp_root_dir: Path, home: Path, path: str
) -> None:
    (jp_root_dir / "course").mkdir()
    (jp_root_dir.parent / "outside").mkdir(exist_ok=True)
    code, body = call(run, jp_fetch, "POST", "kbs", body={"name": "sneaky", "path": path})
    assert (code, body["code"]) == (403, "outside_root")
    assert "outside the folder this Jupyter server serves" in body["message"]
    assert not (home / "kb" / "sneaky").exists()


def test_a_symlink_out_of_the_root_is_refused(
    run: Any, jp_fetch: Any, jp_root_dir: Path, tmp_path: Path, home: Path
) -> None:
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "notes.md").write_text("# Private\n")
    (jp_root_dir / "link").symlink_to(secret)
    code, body = call(run, jp_fetch, "POST", "kbs", body={"name": "linked", "path": "link"})
    assert (code, body["code"]) == (403, "outside_root")


def test_bad_knowledge_base_requests_are_refused_in_words(
    run: Any, jp_fetch: Any, jp_root_dir: Path
) -> None:
    (jp_root_dir / "notes").mkdir()
    code, body = call(run, jp_fetch, "POST", "kbs", body={"name": "bad name!", "path": "notes"})
    assert (code, body["code"]) == (400, "invalid")
    code, body = call(run, jp_fetch, "POST", "kbs", body={"name": "ok", "path": "missing"})
    assert (code, body["code"]) == (404, "not_found")
    code, body = call(run, jp_fetch, "POST", "kbs", body={"name": "ok"})
    assert (code, body["code"]) == (400, "bad_request")


# ---- who may call -----------------------------------------------------------------------------

WRITES = [
    ("DELETE", "memory/L3/profile/m_aaaa1"),
    ("DELETE", "memory/L3/profile"),
    ("POST", "memory/L3/profile/preview"),
    ("POST", "kbs"),
]
POST_BODY = {"mode": "merge", "name": "n", "path": "notes"}


@pytest.mark.parametrize(("method", "path"), WRITES)
def test_an_unauthenticated_write_is_refused(
    run: Any, method: str, path: str, http_server_client: Any, jp_base_url: str,
    memory: MemoryStore, jp_root_dir: Path,
) -> None:  # fmt: skip
    (jp_root_dir / "notes").mkdir()
    response = run(
        http_server_client.fetch(
            f"{jp_base_url}deeptutor/api/{path}", method=method,
            body=json.dumps(POST_BODY) if method == "POST" else None,
            allow_nonstandard_methods=True, raise_error=False,
        )
    )  # fmt: skip
    assert response.code == 403
    assert "Likes worked examples." in memory.read_text("L3", "profile")
    assert not (memory.home / "kb").exists()


def login_cookie(run: Any, jp_fetch: Any) -> str:
    """The cookie a browser holds after opening JupyterLab with its token."""
    response = run(jp_fetch("deeptutor", "api", "kbs"))
    cookies = response.headers.get_list("Set-Cookie")
    return "; ".join(c.split(";", 1)[0] for c in cookies)


@pytest.mark.parametrize(("method", "path"), WRITES)
def test_a_cookie_request_without_the_xsrf_token_is_refused(
    run: Any, jp_fetch: Any, method: str, path: str, http_server_client: Any,
    jp_base_url: str, memory: MemoryStore, jp_root_dir: Path,
) -> None:  # fmt: skip
    (jp_root_dir / "notes").mkdir()
    cookie = login_cookie(run, jp_fetch)
    assert cookie  # logged in by cookie, as a browser is

    def send(headers: dict[str, str]) -> Any:
        return run(
            http_server_client.fetch(
                f"{jp_base_url}deeptutor/api/{path}", method=method, headers=headers,
                body=json.dumps(POST_BODY) if method == "POST" else None,
                allow_nonstandard_methods=True, raise_error=False,
            )
        )  # fmt: skip

    refused = send({"Cookie": cookie})
    assert refused.code == 403
    assert b"XSRF" in refused.body or b"_xsrf" in refused.body
    assert "Likes worked examples." in memory.read_text("L3", "profile")
    assert not (memory.home / "kb").exists()

    # The same request with the XSRF cookie and header, as JupyterLab sends it, goes through.
    token = "2|abcdef01|0123456789abcdef0123456789abcdef|1700000000"
    accepted = send({"Cookie": f"{cookie}; _xsrf={token}", "X-XSRFToken": token})
    assert accepted.code in (200, 202), accepted.body


def test_indexing_runs_off_the_servers_loop_and_a_busy_base_is_not_removed(
    run: Any, jp_fetch: Any, jp_root_dir: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (jp_root_dir / "notes").mkdir()
    (jp_root_dir / "notes" / "rank.md").write_text("# Rank\n\nThe rank counts pivots.\n")
    real = KnowledgeBase.add_sources
    reached, release, threads = threading.Event(), threading.Event(), []

    def held(self: KnowledgeBase, paths: list[Path], progress: Any = None) -> Any:
        # The real indexer, held after its first file until the test has read the progress.
        threads.append(threading.current_thread().name)

        def report(done: int, total: int, current: str) -> None:
            progress(done, total, current)
            if done and not release.is_set():
                reached.set()
                assert release.wait(30)

        return real(self, paths, report)

    monkeypatch.setattr(KnowledgeBase, "add_sources", held)
    code, _ = call(run, jp_fetch, "POST", "kbs", body={"name": "notes", "path": "notes"})
    assert code == 202
    try:
        assert reached.wait(30)
        # The loop answers while the indexer is held: it runs on a worker thread.
        _, body = call(run, jp_fetch, "GET", "kbs")
        [job] = body["jobs"]
        assert job["state"] == "running"
        assert 0 < job["done"] <= job["total"] and job["current"] == "notes/rank.md"
        code, body = call(run, jp_fetch, "POST", "kbs", body={"name": "notes", "path": "notes"})
        assert (code, body["code"]) == (409, "busy")
        code, body = call(run, jp_fetch, "DELETE", "kbs", "notes")
        assert (code, body["code"]) == (409, "busy")
    finally:
        release.set()
    assert wait_for_job(run, jp_fetch, "notes")["job"]["state"] == "done"
    assert threads and threads[0].startswith("deeptutor-kb")


def test_a_model_failure_is_told_in_words_without_the_key(
    run: Any, jp_fetch: Any, memory: MemoryStore, fake_llm: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    secret = "sk-test-" + "k3y" * 8
    monkeypatch.setenv("DEEPTUTOR_API_KEY", secret)
    memory.emit(trace("t_2", "Can you go slower with proofs?"))
    fake_llm.add(Reply(status=400, error=f"Invalid request; your key {secret} is fine"))
    before = memory.read_text("L3", "profile")

    code, body = call(
        run, jp_fetch, "POST", "memory", "L3", "profile", "preview", body={"mode": "update"}
    )

    assert (code, body["code"]) == (502, "model_failed")
    assert body["message"].startswith("The consolidation failed:")
    assert "Invalid request" in body["message"]
    assert secret not in json.dumps(body)
    assert fake_llm.requests[0].headers.get("authorization") == f"Bearer {secret}"
    assert memory.read_text("L3", "profile") == before
