"""The server extension's limits (issue 23): a body too big or nested too deeply, and an answer
over the free-text limit, are refused in words that say the limit, and store nothing (item 12);
the kernels it starts learn the folder it serves, the most a panel attachment may read (item 10)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tornado.httpclient import HTTPClientError

from deeptutor_jupyter import limits
from deeptutor_jupyter.store.db import Store
from tests.server.conftest import ask


def send(run: Any, jp_fetch: Any, method: str, *path: str, body: str) -> tuple[int, dict[str, Any]]:
    try:
        response = run(jp_fetch("deeptutor", "api", *path, method=method, body=body))
    except HTTPClientError as exc:
        assert exc.response is not None
        return exc.code, json.loads(exc.response.body)
    return response.code, json.loads(response.body)


def db_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in home.glob("state.db*"))


def test_deep_or_huge_bodies_and_long_answers_are_refused_with_the_limit(
    run: Any, jp_fetch: Any, store: Store, home: Path
) -> None:
    row = ask(store, "a.ipynb", session_id="nb-aaaaaa-1", mode="text")
    deep = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError on this
    just_over = "[" * (limits.JSON_DEPTH + 1) + "]" * (limits.JSON_DEPTH + 1)
    routes = [
        ("POST", ("pending", row.request_id)),
        ("PUT", ("memory", "L3", "profile")),
        ("POST", ("kbs",)),
        ("POST", ("memory", "L3", "profile", "preview")),
    ]
    for method, path in routes:
        for body in (deep, just_over):
            code, reply = send(run, jp_fetch, method, *path, body=body)
            assert code == 400, (path, reply)
            assert f"the limit is {limits.JSON_DEPTH} levels" in reply["message"]

    before = db_bytes(home)
    answer = {"session_id": row.session_id, "custom_input": "x" * 30_000_000}
    code, reply = send(run, jp_fetch, "POST", "pending", row.request_id, body=json.dumps(answer))
    assert code == 413 and reply["code"] == "too_large"
    assert f"the limit is {limits.JSON_BODY_BYTES:,} bytes" in reply["message"]

    answer["custom_input"] = "x" * (limits.ANSWER_CHARS + 1)
    code, reply = send(run, jp_fetch, "POST", "pending", row.request_id, body=json.dumps(answer))
    assert code == 400 and reply["code"] == "invalid"
    assert f"the limit is {limits.ANSWER_CHARS:,} characters" in reply["message"]
    assert store.get_pending(row.request_id).status == "pending"  # type: ignore[union-attr]
    assert db_bytes(home) - before < 200_000  # a refusal's audit row at most, never the answer


def test_the_extension_tells_the_kernels_it_starts_the_folder_it_serves(jp_serverapp: Any) -> None:
    import os

    from deeptutor_jupyter.config import SERVER_ROOT_ENV

    assert os.environ[SERVER_ROOT_ENV] == str(Path(jp_serverapp.root_dir).resolve())
