from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from deeptutor_jupyter.testing import NO_REPLY_LEFT, FakeLLMServer, Reply, ToolCallSpec


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


def chat(server: FakeLLMServer, **body: Any) -> httpx.Response:
    payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}
    return httpx.post(f"{server.url}/chat/completions", json=payload, timeout=5)


def sse_data(response: httpx.Response) -> list[str]:
    return [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]


def chunks(response: httpx.Response) -> list[dict[str, Any]]:
    data = sse_data(response)
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]]


def deltas(response: httpx.Response) -> list[dict[str, Any]]:
    return [c["choices"][0]["delta"] for c in chunks(response) if c["choices"]]


def test_url_is_loopback_with_v1() -> None:
    with FakeLLMServer() as s:
        assert s.url.startswith("http://127.0.0.1:")
        assert s.url.endswith("/v1")


def test_text_is_streamed_in_several_deltas(server: FakeLLMServer) -> None:
    server.add(Reply(text="Hello there, learner"))
    response = chat(server, stream=True)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    texts = [d["content"] for d in deltas(response) if d.get("content")]
    assert len(texts) > 1
    assert "".join(texts) == "Hello there, learner"
    assert chunks(response)[-1]["choices"][0]["finish_reason"] == "stop"


def test_explicit_chunks_and_reasoning_first(server: FakeLLMServer) -> None:
    server.add(Reply(chunks=["a", "b", "c"], reasoning="think"))
    ds = deltas(chat(server, stream=True))
    reasoning = [d["reasoning_content"] for d in ds if "reasoning_content" in d]
    assert "".join(reasoning) == "think"
    content = [d["content"] for d in ds if d.get("content")]
    assert content == ["a", "b", "c"]
    first_text = next(i for i, d in enumerate(ds) if d.get("content"))
    last_reasoning = max(i for i, d in enumerate(ds) if "reasoning_content" in d)
    assert last_reasoning < first_text


def test_tool_calls_are_streamed_as_openai_deltas(server: FakeLLMServer) -> None:
    server.add(
        Reply(
            tool_calls=[
                ToolCallSpec("search", {"query": "fractions", "limit": 3}),
                ToolCallSpec("bad", "{not json", id="call_x"),
            ]
        )
    )
    response = chat(server, stream=True)
    calls: dict[int, dict[str, str]] = {}
    fragments = 0
    for d in deltas(response):
        for tc in d.get("tool_calls", []):
            slot = calls.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
            if "id" in tc:
                slot["id"] = tc["id"]
                slot["name"] = tc["function"]["name"]
            slot["arguments"] += tc["function"].get("arguments", "")
            fragments += 1
    assert json.loads(calls[0]["arguments"]) == {"query": "fractions", "limit": 3}
    assert calls[0]["name"] == "search"
    assert calls[1] == {"id": "call_x", "name": "bad", "arguments": "{not json"}
    assert fragments > 4
    assert chunks(response)[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_usage_only_when_asked_for(server: FakeLLMServer) -> None:
    usage = {"prompt_tokens": 7, "completion_tokens": 2}
    server.extend([Reply(text="x", usage=usage), Reply(text="x", usage=usage)])
    plain = chunks(chat(server, stream=True))
    assert all("usage" not in c for c in plain)
    asked = chunks(chat(server, stream=True, stream_options={"include_usage": True}))
    assert asked[-1]["choices"] == []
    assert asked[-1]["usage"] == {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}


def test_non_streaming_completion(server: FakeLLMServer) -> None:
    server.add(Reply(text="Hi", tool_calls=[ToolCallSpec("f", {"a": 1})], finish_reason="length"))
    body = chat(server, stream=False).json()
    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["message"]["content"] == "Hi"
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"a": 1}'}
    assert choice["finish_reason"] == "length"
    assert body["usage"]["total_tokens"] >= 1


def test_error_status_with_headers(server: FakeLLMServer) -> None:
    server.add(Reply(status=429, error="Slow down", headers={"Retry-After": "2"}))
    response = chat(server, stream=True)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    error = response.json()["error"]
    assert error["message"] == "Slow down"
    assert error["code"] == "rate_limit_exceeded"


def test_error_body_can_be_given_verbatim(server: FakeLLMServer) -> None:
    server.add(Reply(status=400, error={"detail": "odd"}))
    assert chat(server).json() == {"detail": "odd"}


def test_empty_queue_fails_loudly(server: FakeLLMServer) -> None:
    response = chat(server, stream=True)
    assert response.status_code == 500
    assert response.json()["error"]["message"] == NO_REPLY_LEFT


def test_requests_are_recorded(server: FakeLLMServer) -> None:
    server.add(Reply(text="x"))
    httpx.post(
        f"{server.url}/chat/completions?api-version=1",
        json={"model": "m", "messages": [], "stream": True},
        headers={"Authorization": "Bearer k", "X-Custom": "v"},
    )
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.query == {"api-version": "1"}
    assert request.headers["authorization"] == "Bearer k"
    assert request.headers["x-custom"] == "v"
    assert request.body["model"] == "m"


def test_api_key_is_checked_without_consuming_replies() -> None:
    with FakeLLMServer([Reply(text="ok")], api_key="sk-right-key-1234") as s:
        missing = chat(s)
        assert missing.status_code == 401
        wrong = httpx.post(
            f"{s.url}/chat/completions",
            json={"model": "m", "messages": []},
            headers={"Authorization": "Bearer sk-wrong-key-9999"},
        )
        assert wrong.status_code == 401
        assert wrong.json()["error"]["code"] == "invalid_api_key"
        assert "sk-wrong-key-9999" not in wrong.text
        azure = httpx.post(
            f"{s.url}/chat/completions",
            json={"model": "m", "messages": []},
            headers={"api-key": "sk-right-key-1234"},
        )
        assert azure.status_code == 200
        assert s.pending == 0


def test_unknown_model_gets_404() -> None:
    with FakeLLMServer([Reply(text="ok")], models=["known"]) as s:
        response = chat(s, model="nope")
        assert response.status_code == 404
        assert response.json()["error"]["message"].startswith("The model `nope` does not exist")
        assert s.pending == 1
        listed = httpx.get(f"{s.url}/models").json()
        assert [m["id"] for m in listed["data"]] == ["known"]


def test_hold_after_pauses_the_stream_until_released() -> None:
    resume = threading.Event()
    reply = Reply(chunks=["a", "b", "c", "d"], hold_after=2, hold=resume)
    released_at: list[float] = []

    def release() -> None:
        released_at.append(time.monotonic())
        resume.set()

    with FakeLLMServer([reply]) as s, httpx.Client() as client:
        content: list[tuple[str, float]] = []
        with client.stream("POST", f"{s.url}/chat/completions", json={"stream": True}) as r:
            for line in r.iter_lines():
                if not line.startswith("data: {"):
                    continue
                delta = json.loads(line[6:])["choices"][0]["delta"].get("content")
                if delta:
                    content.append((delta, time.monotonic()))
                    if delta == "b":
                        threading.Timer(1.0, release).start()
        assert [c for c, _ in content] == ["a", "b", "c", "d"]
        assert content[2][1] >= released_at[0]  # "c" waited for the release


def test_break_after_drops_the_connection() -> None:
    with (
        FakeLLMServer([Reply(chunks=["a", "b", "c", "d"], break_after=2)]) as s,
        httpx.Client() as client,
    ):
        seen: list[str] = []
        with (
            pytest.raises(httpx.RemoteProtocolError),
            client.stream("POST", f"{s.url}/chat/completions", json={"stream": True}) as r,
        ):
            for line in r.iter_lines():
                seen.append(line)
        content = [json.loads(x[6:])["choices"][0]["delta"].get("content") for x in seen if x]
        assert [c for c in content if c] == ["a", "b"]
        assert "data: [DONE]" not in seen


def test_raw_sse_is_sent_verbatim(server: FakeLLMServer) -> None:
    server.add(Reply(raw_sse=["data: {not json", "", "data: [DONE]", ""]))
    assert chat(server, stream=True).text == "data: {not json\n\ndata: [DONE]\n\n"


def test_delay_and_stop_are_prompt() -> None:
    s = FakeLLMServer([Reply(text="late", delay=30)]).start()
    port = s.port
    with pytest.raises(httpx.ReadTimeout):
        chat_timeout = httpx.Timeout(5, read=0.2)
        httpx.post(f"{s.url}/chat/completions", json={"stream": True}, timeout=chat_timeout)
    started = time.monotonic()
    s.stop()
    assert time.monotonic() - started < 5
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={})


def test_stop_closes_keep_alive_connections() -> None:
    s = FakeLLMServer([Reply(text="x")]).start()
    port = s.port
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(5)
        response = b""
        while b"\r\n\r\n" not in response:
            response += sock.recv(4096)
        head, body = response.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += sock.recv(4096)
        s.stop()
        remaining = b""
        while chunk := sock.recv(4096):
            remaining += chunk
        assert remaining == b""


def anthropic_events(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(d) for d in sse_data(response)]


def test_anthropic_stream_shape(server: FakeLLMServer) -> None:
    server.add(
        Reply(text="Hello", reasoning="hmm", tool_calls=[ToolCallSpec("f", {"x": 1}, id="tu_1")])
    )
    response = httpx.post(
        f"{server.url}/messages",
        json={"model": "claude", "max_tokens": 10, "messages": [], "stream": True},
    )
    assert response.status_code == 200
    names = [line[7:] for line in response.text.splitlines() if line.startswith("event: ")]
    events = anthropic_events(response)
    assert names == [e["type"] for e in events]
    assert names[0] == "message_start"
    assert names[-2:] == ["message_delta", "message_stop"]
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [b["type"] for b in starts] == ["thinking", "text", "tool_use"]
    assert starts[2]["id"] == "tu_1"
    by_type: dict[str, str] = {}
    for e in events:
        if e["type"] == "content_block_delta":
            d = e["delta"]
            key = {"thinking_delta": "thinking", "text_delta": "text"}.get(d["type"])
            if d["type"] == "input_json_delta":
                by_type["json"] = by_type.get("json", "") + d["partial_json"]
            elif key:
                by_type[key] = by_type.get(key, "") + d[key]
    assert by_type == {"thinking": "hmm", "text": "Hello", "json": '{"x": 1}'}
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


@pytest.mark.parametrize(
    ("finish", "stop"), [(None, "end_turn"), ("length", "max_tokens"), ("refusal", "refusal")]
)
def test_anthropic_stop_reasons(server: FakeLLMServer, finish: str | None, stop: str) -> None:
    server.add(Reply(text="x", finish_reason=finish))
    body = httpx.post(f"{server.url}/messages", json={"model": "c", "messages": []}).json()
    assert body["stop_reason"] == stop
    assert body["content"] == [{"type": "text", "text": "x"}]


def test_anthropic_errors_and_key() -> None:
    with FakeLLMServer([Reply(status=529, error="Overloaded")], api_key="k") as s:
        url = f"{s.url}/messages"
        bad = httpx.post(url, json={"model": "c"}, headers={"x-api-key": "nope"})
        assert bad.status_code == 401
        assert bad.json() == {
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        }
        busy = httpx.post(url, json={"model": "c"}, headers={"x-api-key": "k"})
        assert busy.status_code == 529
        assert busy.json()["error"] == {"type": "overloaded_error", "message": "Overloaded"}


def test_concurrent_requests_each_get_one_reply(server: FakeLLMServer) -> None:
    import concurrent.futures

    server.extend([Reply(text=str(i)) for i in range(8)])
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        bodies = list(pool.map(lambda _: chat(server).json(), range(8)))
    texts = sorted(b["choices"][0]["message"]["content"] for b in bodies)
    assert texts == sorted(str(i) for i in range(8))


async def test_the_in_process_transport_replays_the_same_script_and_log() -> None:
    import httpx

    from deeptutor_jupyter.providers import ChatRequest, ProviderError, TextDelta, make_model

    server = FakeLLMServer(
        [
            Reply(text="Four.", chunks=["Fo", "ur."]),
            Reply(status=429, error="slow down"),
            Reply(text="cut short", break_after=1),
        ]
    )  # never started: no socket at all
    client = httpx.AsyncClient(transport=server.transport())
    model = make_model(
        provider="custom",
        model="fake",
        base_url="http://fake.invalid/v1",
        client=client,
        max_retries=0,
    )
    request = ChatRequest(model="fake", messages=[{"role": "user", "content": "2+2?"}])
    deltas = [e.text async for e in model.stream(request) if isinstance(e, TextDelta)]
    assert deltas == ["Fo", "ur."]
    with pytest.raises(ProviderError) as limited:
        _ = [e async for e in model.stream(request)]
    assert limited.value.kind == "rate_limit" and "slow down" in limited.value.message
    with pytest.raises(ProviderError) as broken:
        _ = [e async for e in model.stream(request)]
    assert broken.value.kind == "stream_broken"
    await model.aclose()
    await client.aclose()
    assert [r.body["messages"][0]["content"] for r in server.requests] == ["2+2?"] * 3
    assert server.requests[0].path == "/v1/chat/completions"
