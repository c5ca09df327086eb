from __future__ import annotations

import json
from typing import Any

import pytest

from deeptutor_jupyter.providers import (
    ChatRequest,
    Compat,
    ProviderError,
    ProviderEvent,
    RoundEnd,
    TextDelta,
    ThinkingDelta,
    ToolsUnsupportedError,
    find_provider,
)
from deeptutor_jupyter.providers.openai_compat import OpenAICompatModel
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec

USER = [{"role": "user", "content": "What is 2+2?"}]
TOOL = {
    "type": "function",
    "function": {"name": "search", "description": "Search notes", "parameters": {"type": "object"}},
}


def make(url: str, provider: str = "openai", sleep: Any = None, **kw: Any) -> OpenAICompatModel:
    spec = find_provider(provider)
    assert spec is not None
    kw.setdefault("model", "gpt-test")
    kw.setdefault("api_key", None)
    return OpenAICompatModel(spec, base_url=url, sleep=sleep, **kw)


async def collect(chat_model: OpenAICompatModel, /, **kw: Any) -> list[ProviderEvent]:
    request = ChatRequest(model=kw.pop("model", ""), messages=kw.pop("messages", USER), **kw)
    try:
        return [event async for event in chat_model.stream(request)]
    finally:
        await chat_model.aclose()


def end_of(events: list[ProviderEvent]) -> RoundEnd:
    assert [type(e) for e in events].count(RoundEnd) == 1
    assert isinstance(events[-1], RoundEnd)
    return events[-1]


def texts(events: list[ProviderEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


async def test_text_streams_as_several_deltas(server: FakeLLMServer) -> None:
    server.add(Reply(text="Two plus two is four."))
    events = await collect(make(server.url))
    assert len(texts(events)) > 1
    assert "".join(texts(events)) == "Two plus two is four."
    assert end_of(events).finish_reason == "stop"
    body = server.requests[0].body
    assert body["stream"] is True
    assert body["messages"] == USER
    assert server.requests[0].path == "/v1/chat/completions"


async def test_reasoning_becomes_thinking_before_text(server: FakeLLMServer) -> None:
    server.add(Reply(reasoning="Add them.", text="4"))
    events = await collect(make(server.url, "deepseek"))
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ThinkingDelta") < kinds.index("TextDelta")
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "Add them."


async def test_reasoning_field_variant(server: FakeLLMServer) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"reasoning": "hm"}, "finish_reason": None}]}
    last = {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
    server.add(Reply(raw_sse=[f"data: {json.dumps(chunk)}", "", f"data: {json.dumps(last)}", ""]))
    events = await collect(make(server.url))
    assert events[:2] == [ThinkingDelta("hm"), TextDelta("ok")]
    assert end_of(events).finish_reason == "stop"


async def test_tool_call_deltas_are_assembled(server: FakeLLMServer) -> None:
    server.add(
        Reply(
            text="Let me look.",
            tool_calls=[
                ToolCallSpec("search", {"query": "long division", "k": 3}, id="call_a"),
                ToolCallSpec("run_cell", {"code": "print(1 + 1)"}),
                ToolCallSpec("broken", '{"x": '),
            ],
        )
    )
    end = end_of(await collect(make(server.url), tools=[TOOL]))
    assert end.finish_reason == "tool_calls"
    assert [c.name for c in end.tool_calls] == ["search", "run_cell", "broken"]
    assert end.tool_calls[0].id == "call_a"
    assert json.loads(end.tool_calls[0].arguments) == {"query": "long division", "k": 3}
    assert json.loads(end.tool_calls[1].arguments) == {"code": "print(1 + 1)"}
    assert end.tool_calls[2].arguments == '{"x": '
    assert server.requests[0].body["tools"] == [TOOL]


async def test_usage_is_requested_and_recorded(server: FakeLLMServer) -> None:
    server.add(Reply(text="4", usage={"prompt_tokens": 12, "completion_tokens": 3}))
    end = end_of(await collect(make(server.url)))
    assert end.usage is not None
    assert (end.usage.prompt_tokens, end.usage.completion_tokens) == (12, 3)
    assert server.requests[0].body["stream_options"] == {"include_usage": True}


async def test_spec_without_stream_options_never_sends_it(server: FakeLLMServer) -> None:
    server.add(Reply(text="4"))
    model = make(server.url, "mistral")
    assert model.compat.stream_options is False
    assert end_of(await collect(model)).usage is None
    assert "stream_options" not in server.requests[0].body


async def test_stream_options_rejection_is_retried_and_remembered(
    server: FakeLLMServer, sleeps: Any
) -> None:
    server.extend(
        [
            Reply(status=400, error="Unrecognized request argument supplied: stream_options"),
            Reply(text="first"),
            Reply(text="second"),
        ]
    )
    model = make(server.url, "openai-compatible", sleep=sleeps)
    assert texts(await collect(model)) != []
    assert model.compat.stream_options is False
    assert any("stream_options" in note for note in model.compat.notes)
    model2_events = await collect(model)
    assert "".join(texts(model2_events)) == "second"
    sent = [("stream_options" in r.body) for r in server.requests]
    assert sent == [True, False, False]
    assert sleeps.delays == []


async def test_rejected_tools_switch_to_text_mode(server: FakeLLMServer) -> None:
    server.extend(
        [
            Reply(status=400, error="registry.ollama.ai/library/gemma:2b does not support tools"),
            Reply(text="plain"),
        ]
    )
    compat = Compat()
    model = make(server.url, "ollama", compat=compat)
    with pytest.raises(ToolsUnsupportedError) as caught:
        await collect(model, tools=[TOOL])
    assert caught.value.kind == "bad_request"
    assert "does not support tools" in caught.value.message
    assert compat.native_tools is False
    assert len(server.requests) == 1
    await collect(model, tools=[TOOL])
    assert "tools" not in server.requests[1].body


@pytest.mark.parametrize(
    ("provider", "given", "sent"),
    [
        ("openai", "openai/gpt-4o", "gpt-4o"),
        ("deepseek", "deepseek/deepseek-chat", "deepseek-chat"),
        ("openrouter", "openai/gpt-4o", "openai/gpt-4o"),
        ("vllm", "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
    ],
)
async def test_model_prefix_stripping_follows_the_spec(
    server: FakeLLMServer, provider: str, given: str, sent: str
) -> None:
    server.add(Reply(text="x"))
    await collect(make(server.url, provider, model=given))
    assert server.requests[0].body["model"] == sent


@pytest.mark.parametrize(
    ("provider", "param"),
    [
        ("openai", "max_completion_tokens"),
        ("azure", "max_completion_tokens"),
        ("groq", "max_tokens"),
    ],
)
async def test_max_tokens_parameter_per_spec(
    server: FakeLLMServer, provider: str, param: str
) -> None:
    server.add(Reply(text="x"))
    await collect(make(server.url, provider), max_tokens=77, temperature=0.2)
    body = server.requests[0].body
    assert body[param] == 77
    assert {"max_tokens", "max_completion_tokens"} & body.keys() == {param}
    assert body["temperature"] == 0.2


async def test_request_model_overrides_and_bearer_key(server: FakeLLMServer) -> None:
    server.add(Reply(text="x"))
    await collect(make(server.url, api_key="sk-abc"), model="gpt-other")
    request = server.requests[0]
    assert request.body["model"] == "gpt-other"
    assert request.headers["authorization"] == "Bearer sk-abc"
    assert request.headers["accept"] == "text/event-stream"


async def test_azure_uses_api_key_header_and_api_version(server: FakeLLMServer) -> None:
    server.add(Reply(text="x"))
    base = f"{server.url}/openai/deployments/my-gpt"
    await collect(make(base, "azure", model="my-gpt", api_key="az-key"))
    request = server.requests[0]
    assert request.path == "/v1/openai/deployments/my-gpt/chat/completions"
    assert request.query == {"api-version": "2024-10-21"}
    assert request.headers["api-key"] == "az-key"
    assert "authorization" not in request.headers


async def test_azure_api_version_in_base_url_wins(server: FakeLLMServer) -> None:
    server.add(Reply(text="x"))
    base = f"{server.url}/openai/deployments/d?api-version=2025-01-01-preview"
    await collect(make(base, "azure", api_key="k"))
    assert server.requests[0].path.endswith("/deployments/d/chat/completions")
    assert server.requests[0].query == {"api-version": "2025-01-01-preview"}


async def test_missing_done_is_fine_after_a_finish_reason(server: FakeLLMServer) -> None:
    last = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
    server.add(Reply(raw_sse=[f"data: {json.dumps(last)}", ""]))
    events = await collect(make(server.url))
    assert texts(events) == ["hi"]
    assert end_of(events).finish_reason == "stop"


async def test_malformed_stream(server: FakeLLMServer) -> None:
    server.add(Reply(raw_sse=["data: {not json", "", "data: [DONE]", ""]))
    with pytest.raises(ProviderError) as caught:
        await collect(make(server.url))
    assert caught.value.kind == "malformed"
    assert "not JSON" in caught.value.message


async def test_server_that_ignores_stream_true(server: FakeLLMServer) -> None:
    server.add(
        Reply(
            text="whole",
            reasoning="r",
            tool_calls=[ToolCallSpec("search", {"q": 1}, id="c1")],
            usage={"prompt_tokens": 2, "completion_tokens": 1},
            ignore_stream=True,
        )
    )
    events = await collect(make(server.url))
    assert events[:2] == [ThinkingDelta("r"), TextDelta("whole")]
    end = end_of(events)
    assert end.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in end.tool_calls] == [("c1", "search", '{"q": 1}')]
    assert end.usage is not None
    assert end.usage.total_tokens == 3
