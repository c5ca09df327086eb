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
    # None of the three used anything: each hold went back to the student's day.
    usage = httpx.get(f"{hub.service}/v1/usage", headers={"Authorization": f"Bearer {token}"})
    assert (usage.json()["held_now"], usage.json()["used_today"]) == (0, 0)


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
        chunks = r.iter_text()  # kept: a dropped generator would close the connection now
        for chunk in chunks:
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


def test_a_revoked_token_stops_working_within_the_auth_cache_time(hub: Hub) -> None:
    made = hub.admin("POST", "/users/carol/tokens", json={"scopes": [SERVICE_SCOPE]})
    token, token_id = made.json()["token"], made.json()["id"]
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{hub.service}/v1/models", headers=headers).status_code == 200
    assert hub.admin("DELETE", f"/users/carol/tokens/{token_id}").status_code == 204
    revoked = time.monotonic()
    # auth_cache_seconds is 10 by default (it was 60): the cached answer expires by then.
    while httpx.get(f"{hub.service}/v1/models", headers=headers).status_code == 200:
        assert time.monotonic() - revoked < 10 + 3, "a revoked token kept working"
        time.sleep(0.25)
    assert httpx.get(f"{hub.service}/v1/models", headers=headers).status_code == 403


def test_group_limits_apply_to_a_kernel_token(hub: Hub) -> None:
    # The scopes of the token configure() mints for kernels, which include reading the groups.
    server_like = [SERVICE_SCOPE, "read:users:groups!user"]
    dan = hub.token_for("dan", server_like)
    mine = httpx.get(f"{hub.service}/v1/usage", headers={"Authorization": f"Bearer {dan}"})
    assert mine.json()["limits"] == {"daily_tokens": 50000, "requests_per_minute": None}
    erin = hub.token_for("erin", server_like)
    theirs = httpx.get(f"{hub.service}/v1/usage", headers={"Authorization": f"Bearer {erin}"})
    assert theirs.json()["limits"] == {"daily_tokens": 20000, "requests_per_minute": None}


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


def test_a_request_the_gateway_cannot_bill_is_refused_and_harms_no_one(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    eve = hub.token_for("bob", [SERVICE_SCOPE])
    frank = hub.token_for("carol", [SERVICE_SCOPE])
    upstream.clear_requests()
    for extra, words in [
        ({"max_tokens": 2**63}, "max_tokens must be a whole number"),
        ({"stream": "true"}, "stream must be true or false"),
        ({"n": 5}, "one answer per request"),
        ({"service_tier": "priority"}, "does not pass on these parameters: 'service_tier'"),
    ]:
        r = chat(hub, eve, **extra)
        assert r.status_code == 400, r.text
        assert words in r.json()["error"]["message"]
        assert r.json()["error"]["code"] == "invalid_request"
    assert upstream.requests == []
    # Nothing was held for the refused requests, and another student is served as ever.
    mine = httpx.get(f"{hub.service}/v1/usage", headers={"Authorization": f"Bearer {eve}"})
    assert mine.json()["held_now"] == 0
    upstream.add(Reply(text="Fine."))
    assert sse_text(chat(hub, frank)) == "Fine."


def test_the_upstream_is_told_the_answer_length_the_budget_allows(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    # The hub's students have 20,000 tokens a day (conftest): a request that names no length
    # goes upstream with the course's reserve (4,096), a larger one than is left with what is
    # left after its prompt.
    token = hub.token_for("erin", [SERVICE_SCOPE])
    upstream.clear_requests()
    upstream.add(Reply(text="a", usage={"prompt_tokens": 10, "completion_tokens": 1}))
    upstream.add(Reply(text="b", usage={"prompt_tokens": 10, "completion_tokens": 1}))
    upstream.add(Reply(text="c", usage={"prompt_tokens": 10, "completion_tokens": 1}))
    assert chat(hub, token).status_code == 200
    assert chat(hub, token, max_completion_tokens=50_000).status_code == 200
    assert chat(hub, token, max_tokens=7).status_code == 200
    unnamed, large, small = upstream.requests[-3:]
    assert unnamed.body["max_tokens"] == 4_096
    assert "max_completion_tokens" not in unnamed.body
    assert 10_000 < large.body["max_completion_tokens"] < 20_000
    assert small.body["max_tokens"] == 7


def test_an_upstream_that_echoes_the_key_does_not_show_it_to_the_student(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    token = hub.token_for("bob", [SERVICE_SCOPE])
    upstream.add(Reply(status=400, error=f"Bad request for Authorization: Bearer {UPSTREAM_KEY}"))
    r = chat(hub, token, max_tokens=10)
    assert r.status_code == 400
    assert UPSTREAM_KEY not in r.text
    assert "Bearer [redacted]" in r.json()["error"]["message"]
    upstream.add(Reply(status=401, error=f"Incorrect API key provided: {UPSTREAM_KEY}"))
    r = chat(hub, token, max_tokens=10)
    assert r.status_code == 502
    assert UPSTREAM_KEY not in r.text


def test_a_body_is_read_only_after_the_token_was_checked_and_only_so_far(hub: Hub) -> None:
    import socket

    # An anonymous request announcing 90 MB is refused from its headers: the answer comes
    # while 64 KiB of the body were sent (before, the service waited to read it all). Sent
    # to the service's own socket: the proxy, cut off mid-body, would answer 503 itself.
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(20)
        sock.connect(str(hub.socket_path))
        sock.sendall(
            b"POST /services/deeptutor/v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nContent-Length: 90000000\r\n\r\n"
            + b"x"
            * (64 << 10)
        )
        head = sock.recv(4096).decode("latin-1")
    assert head.startswith("HTTP/1.1 401"), head[:200]

    token = hub.token_for("bob", [SERVICE_SCOPE])
    big = "x" * (9 << 20)
    r = chat(hub, token, messages=[{"role": "user", "content": big}])
    assert r.status_code == 413
    assert "larger than the course service takes" in r.json()["error"]["message"]
