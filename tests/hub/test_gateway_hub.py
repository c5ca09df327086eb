"""The course gateway behind a real JupyterHub and configurable-http-proxy, on loopback.

Students' requests go through the proxy to the service, which checks their hub token with the
hub and forwards to FakeLLMServer with the course's key.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.hub.harness import UPSTREAM_KEY, Hub

pytestmark = pytest.mark.hub

SERVICE_SCOPE = "access:services!service=deeptutor"


def chat(hub: Hub, token: str | None, *, stream: bool = True, **extra: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    body = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "What is a derivative?"}],
        "stream": stream,
        **extra,
    }
    return httpx.post(f"{hub.service}/v1/chat/completions", json=body, headers=headers, timeout=30)


def sse_text(response: httpx.Response) -> str:
    out = []
    for line in response.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:]).get("choices", []):
                out.append(choice.get("delta", {}).get("content") or "")
    return "".join(out)


def test_a_student_token_reaches_the_upstream_with_the_course_key(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    token = hub.token_for("alice", [SERVICE_SCOPE])
    upstream.clear_requests()
    upstream.add(
        Reply(text="The slope of the tangent.", usage={"prompt_tokens": 9, "completion_tokens": 5})
    )
    r = chat(hub, token)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    assert sse_text(r) == "The slope of the tangent."
    sent = upstream.requests[-1]
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert token not in json.dumps(sent.headers)
    assert sent.body["stream_options"] == {"include_usage": True}
    assert UPSTREAM_KEY not in r.text and UPSTREAM_KEY not in json.dumps(dict(r.headers))

    upstream.add(Reply(text="Rate of change.", usage={"prompt_tokens": 4, "completion_tokens": 3}))
    r = chat(hub, token, stream=False)
    assert r.status_code == 200
    assert r.json()["choices"][0]["message"]["content"] == "Rate of change."

    models = httpx.get(f"{hub.service}/v1/models", headers={"Authorization": f"Bearer {token}"})
    assert [m["id"] for m in models.json()["data"]] == ["fake-model", "fake-large"]

    # The hub's log (which carries the service's own output) holds neither secret.
    assert UPSTREAM_KEY not in hub.log_text(whole=True)
    assert token not in hub.log_text(whole=True)

    mine = httpx.get(f"{hub.service}/v1/usage", headers={"Authorization": f"Bearer {token}"}).json()
    row = next(u for u in mine["usage"] if u["model"] == "fake-model")
    assert (row["requests"], row["prompt_tokens"], row["completion_tokens"]) == (2, 13, 8)
    assert "derivative" not in json.dumps(mine)  # counts only, never the chat text


@pytest.mark.parametrize(
    ("who", "status", "code"),
    [
        ("nobody", 401, "no_token"),
        ("garbage", 403, "invalid_token"),
        ("service", 403, "not_a_user"),
        ("unscoped", 403, "missing_scope"),
    ],
)
def test_requests_without_a_fitting_token_are_refused(
    hub: Hub, upstream: FakeLLMServer, who: str, status: int, code: str
) -> None:
    token = {
        "nobody": None,
        "garbage": "not-a-hub-token",
        "service": hub.admin_token,
        "unscoped": hub.token_for("bob", ["read:users:name!user"]) if who == "unscoped" else "",
    }[who]
    upstream.clear_requests()
    r = chat(hub, token)
    assert r.status_code == status
    assert r.json()["error"]["code"] == code
    assert r.json()["error"]["type"] == "course_service"
    assert upstream.requests == []  # nothing reached the model


def test_a_model_outside_the_allow_list_is_refused(hub: Hub, upstream: FakeLLMServer) -> None:
    token = hub.token_for("bob", [SERVICE_SCOPE])
    upstream.clear_requests()
    r = chat(hub, token, model="gpt-5")
    assert r.status_code == 404
    assert "does not offer the model 'gpt-5'" in r.json()["error"]["message"]
    assert upstream.requests == []


def test_upstream_errors_pass_through_with_status_and_body(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    token = hub.token_for("bob", [SERVICE_SCOPE])
    upstream.add(Reply(status=400, error="max_tokens is too large"))
    r = chat(hub, token, max_tokens=10)
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "max_tokens is too large"
    upstream.add(Reply(status=429, error="Slow down", headers={"Retry-After": "7"}))
    r = chat(hub, token, max_tokens=10)
    assert (r.status_code, r.headers.get("retry-after")) == (429, "7")
    # The course's key refused upstream is the instructor's problem, and says so.
    upstream.add(Reply(status=401, error="Incorrect API key provided"))
    r = chat(hub, token, max_tokens=10)
    assert r.status_code == 502
    assert r.json()["error"]["message"] == (
        'The model server refused the course\'s key ("Incorrect API key provided"). '
        "Tell your instructor."
    )


def test_a_student_who_hangs_up_closes_the_upstream_request(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    token = hub.token_for("bob", [SERVICE_SCOPE])
    upstream.clear_requests()
    upstream.add(Reply(chunks=[f"w{i} " for i in range(2000)], chunk_delay=0.02))
    body = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "long"}],
        "stream": True,
    }
    headers = {"Authorization": f"Bearer {token}"}
    url = f"{hub.service}/v1/chat/completions"
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", url, json=body, headers=headers) as r,
    ):
        for chunk in r.iter_text():
            if "w3" in chunk:
                break
        port = upstream.requests[-1].client_port
        assert upstream_connection_open(upstream, port)
    # Closing our connection makes the gateway drop its upstream request long before the
    # 2000 chunks are out (the scripted reply would take 40 s).
    wait_until(lambda: not upstream_connection_open(upstream, port))
    upstream.clear_requests()
    upstream.add(Reply(text="still fine"))
    assert sse_text(chat(hub, token)) == "still fine"


def upstream_connection_open(upstream: FakeLLMServer, client_port: int) -> bool:
    """Whether the fake server still holds the connection the gateway opened from that port."""
    for sock in list(upstream._server.open_sockets):  # type: ignore[union-attr]
        try:
            if sock.getpeername()[1] == client_port:
                return True
        except OSError:
            continue
    return False


def wait_until(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_an_upstream_that_drops_mid_answer_ends_the_students_stream_with_an_error(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    token = hub.token_for("bob", [SERVICE_SCOPE])
    upstream.add(Reply(chunks=["one ", "two ", "three"], break_after=2))
    r = chat(hub, token)
    assert r.status_code == 200
    events = [json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: {")]
    assert "".join(c["delta"].get("content") or "" for e in events for c in e.get("choices", []))
    assert events[-1]["error"]["code"] == 502
    assert "stopped answering" in events[-1]["error"]["message"]


def test_group_limits_apply_to_a_server_token(hub: Hub) -> None:
    # The scopes configure() gives a server's token, which include reading the user's groups.
    server_like = [SERVICE_SCOPE, "read:users:groups!user"]
    dan = hub.token_for("dan", server_like)
    mine = httpx.get(f"{hub.service}/v1/usage", headers={"Authorization": f"Bearer {dan}"})
    assert mine.json()["limits"] == {"daily_tokens": 5000, "requests_per_minute": None}
    erin = hub.token_for("erin", server_like)
    theirs = httpx.get(f"{hub.service}/v1/usage", headers={"Authorization": f"Bearer {erin}"})
    assert theirs.json()["limits"] == {"daily_tokens": 1000, "requests_per_minute": None}


def test_an_upstream_without_stream_options_is_asked_again_without_them(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    token = hub.token_for("erin", [SERVICE_SCOPE])
    upstream.clear_requests()
    upstream.extend(
        [
            Reply(status=400, error="Unrecognized request argument supplied: stream_options"),
            Reply(text="Fine without."),
        ]
    )
    r = chat(hub, token)
    assert (r.status_code, sse_text(r)) == (200, "Fine without.")
    first, second = upstream.requests[-2:]
    assert first.body["stream_options"] == {"include_usage": True}
    assert "stream_options" not in second.body


def test_a_student_who_leaves_before_the_answer_starts_gets_the_hold_back(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    token = hub.token_for("carol", [SERVICE_SCOPE])
    headers = {"Authorization": f"Bearer {token}"}
    upstream.add(Reply(text="late", delay=3.0))
    with pytest.raises(httpx.ReadTimeout):
        chat_timeout = httpx.Timeout(30, read=0.5)
        body = {"model": "fake-model", "messages": [{"role": "user", "content": "x"}]}
        httpx.post(
            f"{hub.service}/v1/chat/completions",
            json={**body, "stream": True, "max_tokens": 300},
            headers=headers,
            timeout=chat_timeout,
        )

    def held() -> int:
        r = httpx.get(f"{hub.service}/v1/usage", headers=headers)
        return int(r.json()["held_now"])

    wait_until(lambda: held() == 0)
    assert httpx.get(f"{hub.service}/v1/usage", headers=headers).json()["used_today"] == 0
