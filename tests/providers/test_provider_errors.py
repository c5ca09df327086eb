from __future__ import annotations

import asyncio
from typing import Any

import pytest

from deeptutor_jupyter.providers import ChatRequest, ProviderError, TextDelta, find_provider
from deeptutor_jupyter.providers.base import Waiting
from deeptutor_jupyter.providers.errors import (
    is_stream_options_rejection,
    is_tools_rejection,
    provider_message,
    retry_after_seconds,
)
from deeptutor_jupyter.providers.openai_compat import OpenAICompatModel
from deeptutor_jupyter.testing import NO_REPLY_LEFT, FakeLLMServer, Reply, ToolCallSpec, faults

SECRET = "sk-test-SECRET-0123456789abcdef"


def make(url: str, provider: str = "openai", **kw: Any) -> OpenAICompatModel:
    spec = find_provider(provider)
    assert spec is not None
    kw.setdefault("model", "gpt-test")
    kw.setdefault("api_key", None)
    return OpenAICompatModel(spec, base_url=url, **kw)


async def failure(chat_model: OpenAICompatModel, /) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        async for _ in chat_model.stream(ChatRequest(model="", messages=[])):
            pass
    await chat_model.aclose()
    return caught.value


def full_text(error: ProviderError) -> str:
    return " ".join([str(error), error.message, error.hint, error.url, repr(error)])


async def test_wrong_key_is_worded_for_the_learner(sleeps: Any) -> None:
    with FakeLLMServer(api_key="the-right-key") as server:
        error = await failure(make(server.url, api_key=SECRET, sleep=sleeps))
    assert error.kind == "auth"
    assert error.status == 401
    assert error.message.startswith("The API key was rejected by OpenAI.")
    assert "Incorrect API key provided" in error.message
    assert "OPENAI_API_KEY" in error.hint
    assert error.provider == "openai"
    assert len(server.requests) == 1
    assert sleeps.delays == []


async def test_key_is_scrubbed_even_when_echoed(server: FakeLLMServer, sleeps: Any) -> None:
    server.add(Reply(status=401, error=f"Incorrect API key provided: {SECRET}"))
    chat_model = make(server.url, api_key=SECRET, sleep=sleeps)
    error = await failure(chat_model)
    assert SECRET not in full_text(error)
    assert SECRET not in repr(chat_model)
    assert "***" in error.message


async def test_unknown_model_names_model_and_url(sleeps: Any) -> None:
    with FakeLLMServer(models=["llama3.1"]) as server:
        error = await failure(make(server.url, "ollama", model="llama9", sleep=sleeps))
    assert error.kind == "not_found"
    assert error.message.startswith(f"Model 'llama9' was not found at {server.url}.")
    assert "`%tutor config`" in error.hint
    assert "ollama pull" in error.hint


async def test_connection_refused_on_a_local_server(dead_url: str, sleeps: Any) -> None:
    error = await failure(make(dead_url, "ollama", max_retries=2, sleep=sleeps))
    assert error.kind == "connection"
    assert error.message == f"No server is answering at {dead_url}."
    assert "ollama serve" in error.hint
    assert len(sleeps.delays) == 2


async def test_connection_refused_remote_hint(dead_url: str, sleeps: Any) -> None:
    error = await failure(make(dead_url, "openai", max_retries=0, sleep=sleeps))
    assert error.kind == "connection"
    assert "base URL" in error.hint


async def test_429_honours_retry_after_then_succeeds(server: FakeLLMServer, sleeps: Any) -> None:
    server.extend(
        [
            Reply(status=429, error="Rate limit reached", headers={"Retry-After": "7"}),
            Reply(status=429, headers={"Retry-After": "45"}),
            Reply(text="finally"),
        ]
    )
    chat_model = make(server.url, sleep=sleeps)
    events = [e async for e in chat_model.stream(ChatRequest(model="", messages=[]))]
    await chat_model.aclose()
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "finally"
    assert len(server.requests) == 3
    assert sleeps.delays == [7.0, 45.0]
    # Each wait is announced before it starts, for the status line's countdown.
    waits = [e for e in events if isinstance(e, Waiting)]
    assert [(w.seconds, w.status) for w in waits] == [(7.0, 429), (45.0, 429)]
    assert waits[0].reason == "rate limited by OpenAI"


async def test_a_retry_after_longer_than_max_retry_wait_fails_at_once(
    server: FakeLLMServer, sleeps: Any
) -> None:
    server.add(Reply(status=429, error="Slow down", headers={"Retry-After": "600"}))
    error = await failure(make(server.url, sleep=sleeps, max_retry_wait=60))
    assert error.kind == "rate_limit" and error.status == 429
    assert "asked to wait 600 s" in error.message and "max_retry_wait (60 s)" in error.message
    assert "10 min" in error.hint and "DEEPTUTOR_MAX_RETRY_WAIT" in error.hint
    assert sleeps.delays == [] and len(server.requests) == 1


async def test_a_stream_of_keep_alives_only_times_out_as_idle(server: FakeLLMServer) -> None:
    server.add(Reply(raw_sse=[": keep-alive"] * 400, chunk_delay=0.01))
    error = await failure(make(server.url, idle_timeout=0.5))
    assert error.kind == "timeout"
    assert "sent nothing for 0.5 s" in error.message and "idle_timeout" in error.hint


async def test_empty_chunks_do_not_keep_a_stream_alive(server: FakeLLMServer) -> None:
    # No choices, `delta: {}`, `content: ""` and a tool fragment without bytes: none is progress.
    server.add(faults.empty_chunks_only(interval=0.05))
    server.add(
        Reply(
            raw_sse=[
                'data: {"choices": [{"index": 0, "delta": {"tool_calls": '
                '[{"index": 0, "function": {"arguments": ""}}]}}]}',
                "",
            ]
            * 200,
            chunk_delay=0.02,
        )
    )
    for _ in range(2):
        async with asyncio.timeout(10):  # the empty-chunk fault never ends on its own
            error = await failure(make(server.url, idle_timeout=0.5))
        assert error.kind == "timeout" and "sent nothing for 0.5 s" in error.message


async def test_tool_call_fragments_keep_a_stream_alive(server: FakeLLMServer) -> None:
    # A long tool call streams no text for a while; its fragments are not idleness.
    args = '{"expression": "' + "1+" * 40 + '1"}'
    server.add(
        Reply(
            tool_calls=[ToolCallSpec("calculate", args, id="c1", pieces=40)],
            # 2 s in all, twice the idle timeout; each gap a twentieth of it, so a loaded machine
            # does not stall one past it (0.15 s gaps against 0.6 s did once)
            chunk_delay=0.05,
        )
    )
    chat_model = make(server.url, idle_timeout=1.0)
    events = [e async for e in chat_model.stream(ChatRequest(model="", messages=[]))]
    await chat_model.aclose()
    assert events[-1].tool_calls[0].arguments == args  # type: ignore[union-attr]


async def test_5xx_retried_with_growing_backoff(server: FakeLLMServer, sleeps: Any) -> None:
    server.extend([Reply(status=503), Reply(status=502), Reply(text="ok")])
    chat_model = make(server.url, sleep=sleeps, backoff_base=0.1)
    events = [e async for e in chat_model.stream(ChatRequest(model="", messages=[]))]
    await chat_model.aclose()
    assert any(isinstance(e, TextDelta) for e in events)
    assert len(server.requests) == 3
    first, second = sleeps.delays
    assert 0.1 <= first <= 0.125
    assert 0.2 <= second <= 0.25


async def test_5xx_after_retries_is_a_server_error(server: FakeLLMServer, sleeps: Any) -> None:
    server.extend([Reply(status=500, error="boom")] * 3)
    error = await failure(make(server.url, max_retries=2, sleep=sleeps))
    assert error.kind == "server"
    assert "boom" in error.message
    assert len(server.requests) == 3


async def test_429_after_retries_is_a_rate_limit(server: FakeLLMServer, sleeps: Any) -> None:
    server.extend([Reply(status=429, error="You exceeded your current quota")] * 2)
    error = await failure(make(server.url, max_retries=1, sleep=sleeps))
    assert error.kind == "rate_limit"
    assert "quota" in error.message


async def test_empty_script_fails_loudly(server: FakeLLMServer, sleeps: Any) -> None:
    error = await failure(make(server.url, max_retries=1, sleep=sleeps))
    assert NO_REPLY_LEFT in error.message


async def test_no_retry_once_output_has_streamed(server: FakeLLMServer, sleeps: Any) -> None:
    server.extend([Reply(chunks=["One", " two", " three"], break_after=2), Reply(text="again")])
    chat_model = make(server.url, sleep=sleeps)
    seen: list[str] = []
    with pytest.raises(ProviderError) as caught:
        async for event in chat_model.stream(ChatRequest(model="", messages=[])):
            if isinstance(event, TextDelta):
                seen.append(event.text)
    await chat_model.aclose()
    assert seen == ["One", " two"]
    assert caught.value.kind == "stream_broken"
    assert caught.value.message.startswith(
        "The connection to OpenAI dropped while the answer was streaming."
    )
    assert len(server.requests) == 1
    assert server.pending == 1


async def test_drop_before_any_output_is_retried(server: FakeLLMServer, sleeps: Any) -> None:
    server.extend([Reply(text="lost", break_after=0), Reply(text="kept")])
    chat_model = make(server.url, sleep=sleeps)
    events = [e async for e in chat_model.stream(ChatRequest(model="", messages=[]))]
    await chat_model.aclose()
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "kept"
    assert len(server.requests) == 2


async def test_error_event_inside_the_stream_is_retried(server: FakeLLMServer, sleeps: Any) -> None:
    server.extend(
        [
            Reply(raw_sse=['data: {"error": {"message": "Upstream overloaded", "code": 502}}', ""]),
            Reply(text="ok"),
        ]
    )
    chat_model = make(server.url, "openrouter", sleep=sleeps)
    events = [e async for e in chat_model.stream(ChatRequest(model="", messages=[]))]
    await chat_model.aclose()
    assert any(isinstance(e, TextDelta) for e in events)
    assert len(sleeps.delays) == 1


async def test_read_timeout_is_not_retried(server: FakeLLMServer, sleeps: Any) -> None:
    server.extend([Reply(text="late", delay=10), Reply(text="unused")])
    error = await failure(make(server.url, timeout=0.2, sleep=sleeps))
    assert error.kind == "timeout"
    assert "did not answer in time" in error.message
    assert len(server.requests) == 1


async def test_bad_request_quotes_the_provider(server: FakeLLMServer) -> None:
    server.add(Reply(status=400, error="messages: must not be empty"))
    error = await failure(make(server.url))
    assert error.kind == "bad_request"
    assert error.status == 400
    assert "OpenAI said: messages: must not be empty" in error.message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"error": {"message": "bad key", "type": "x"}}', "bad key"),
        ('{"type": "error", "error": {"type": "x", "message": "nope"}}', "nope"),
        ('{"error": "flat"}', "flat"),
        ('{"detail": "fastapi style"}', "fastapi style"),
        ('[{"error": {"message": "gemini list"}}]', "gemini list"),
        ("plain text failure", "plain text failure"),
    ],
)
def test_provider_message_shapes(body: str, expected: str) -> None:
    assert provider_message(body) == expected


@pytest.mark.parametrize(
    "body",
    [
        "registry.ollama.ai/library/gemma:2b does not support tools",
        "This model doesn't support function calling",
        "No endpoints found that support tool use.",
        "tools param requires --jinja flag",
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        "tool_choice is not supported for this model",
    ],
)
def test_tools_rejections_are_recognised(body: str) -> None:
    assert is_tools_rejection(400, body)


@pytest.mark.parametrize(
    "body", ["Invalid value for 'temperature'", "Unrecognized request argument: stream_options"]
)
def test_other_400s_are_not_tools_rejections(body: str) -> None:
    assert not is_tools_rejection(400, body)


def test_stream_options_predicate() -> None:
    assert is_stream_options_rejection(400, "Unrecognized request argument: stream_options")
    assert is_stream_options_rejection(422, "extra field include_usage not permitted")
    assert not is_stream_options_rejection(500, "stream_options")
    assert not is_stream_options_rejection(400, "temperature out of range")


def test_retry_after_parsing() -> None:
    assert retry_after_seconds({"Retry-After": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None
