from __future__ import annotations

import json
from typing import Any

import pytest

from deeptutor_jupyter.providers import (
    ChatRequest,
    ProviderError,
    ProviderEvent,
    RoundEnd,
    TextDelta,
    ThinkingDelta,
    find_provider,
)
from deeptutor_jupyter.providers.anthropic import AnthropicModel, to_anthropic_messages
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the notes",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]

HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a tutor."},
    {"role": "user", "content": "Find fractions."},
    {
        "role": "assistant",
        "content": "Looking.",
        "tool_calls": [
            {
                "id": "t1",
                "type": "function",
                "function": {"name": "search", "arguments": '{"q": "a"}'},
            },
            {"id": "t2", "type": "function", "function": {"name": "search", "arguments": "{bad"}},
        ],
    },
    {"role": "tool", "tool_call_id": "t1", "content": "result one"},
    {"role": "tool", "tool_call_id": "t2", "content": "result two"},
    {"role": "user", "content": "Thanks"},
]


def make(url: str, sleep: Any = None, **kw: Any) -> AnthropicModel:
    spec = find_provider("claude")
    assert spec is not None
    kw.setdefault("model", "claude-test")
    kw.setdefault("api_key", "ant-key")
    return AnthropicModel(spec, base_url=url, sleep=sleep, **kw)


async def collect(chat_model: AnthropicModel, /, **kw: Any) -> list[ProviderEvent]:
    request = ChatRequest(model="", messages=kw.pop("messages", HISTORY), **kw)
    try:
        return [event async for event in chat_model.stream(request)]
    finally:
        await chat_model.aclose()


async def test_request_is_translated_to_the_messages_api(server: FakeLLMServer) -> None:
    server.add(Reply(text="ok"))
    await collect(make(server.url), tools=TOOLS, temperature=0.3)
    request = server.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "ant-key"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    body = request.body
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 4096
    assert body["stream"] is True
    assert body["system"] == "You are a tutor."
    assert body["temperature"] == 0.3
    assert body["tools"] == [
        {
            "name": "search",
            "description": "Search the notes",
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
        }
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Find fractions."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "a"}},
                {
                    "type": "tool_use",
                    "id": "t2",
                    "name": "search",
                    "input": {"raw_arguments": "{bad"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "result one"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "result two"},
                {"type": "text", "text": "Thanks"},
            ],
        },
    ]


def test_images_and_empty_messages() -> None:
    system, turns = to_anthropic_messages(
        [
            {"role": "user", "content": ""},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
                ],
            },
        ]
    )
    assert system == ""
    assert turns == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                },
                {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
            ],
        }
    ]


async def test_streaming_text_thinking_and_tool_use(server: FakeLLMServer) -> None:
    server.add(
        Reply(
            reasoning="Check the notes first.",
            text="Let me search.",
            tool_calls=[
                ToolCallSpec("search", {"q": "fractions"}, id="toolu_1"),
                ToolCallSpec("search", {}, id="toolu_2"),
            ],
            usage={"prompt_tokens": 20, "completion_tokens": 9},
        )
    )
    events = await collect(make(server.url), tools=TOOLS)
    thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    text = [e.text for e in events if isinstance(e, TextDelta)]
    assert thinking == "Check the notes first."
    assert len(text) > 1
    assert "".join(text) == "Let me search."
    end = events[-1]
    assert isinstance(end, RoundEnd)
    assert [type(e) for e in events].count(RoundEnd) == 1
    assert end.finish_reason == "tool_calls"
    assert [(c.id, c.name) for c in end.tool_calls] == [
        ("toolu_1", "search"),
        ("toolu_2", "search"),
    ]
    assert json.loads(end.tool_calls[0].arguments) == {"q": "fractions"}
    assert json.loads(end.tool_calls[1].arguments) == {}
    assert end.usage is not None
    assert (end.usage.prompt_tokens, end.usage.completion_tokens) == (20, 9)


@pytest.mark.parametrize(
    ("scripted", "finish"), [(None, "stop"), ("length", "length"), ("refusal", "refusal")]
)
async def test_stop_reasons_map_to_finish_reasons(
    server: FakeLLMServer, scripted: str | None, finish: str
) -> None:
    server.add(Reply(text="x", finish_reason=scripted))
    end = (await collect(make(server.url)))[-1]
    assert isinstance(end, RoundEnd)
    assert end.finish_reason == finish


async def test_max_tokens_from_the_request(server: FakeLLMServer) -> None:
    server.add(Reply(text="x"))
    await collect(make(server.url, model="anthropic/claude-x"), max_tokens=100)
    assert server.requests[0].body["max_tokens"] == 100
    assert server.requests[0].body["model"] == "claude-x"


async def test_rejected_key_names_anthropic() -> None:
    with FakeLLMServer(api_key="right") as server, pytest.raises(ProviderError) as caught:
        await collect(make(server.url, api_key="wrong-key-value"))
    error = caught.value
    assert error.kind == "auth"
    assert (
        error.message == "The API key was rejected by Anthropic. Anthropic said: invalid x-api-key"
    )
    assert "ANTHROPIC_API_KEY" in error.hint
    assert "wrong-key-value" not in error.message + error.hint


async def test_overloaded_is_retried(server: FakeLLMServer, sleeps: Any) -> None:
    server.extend([Reply(status=529, error="Overloaded"), Reply(text="fine")])
    events = await collect(make(server.url, sleep=sleeps))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "fine"
    assert len(sleeps.delays) == 1


async def test_error_event_mid_stream_after_output_is_stream_broken(
    server: FakeLLMServer, sleeps: Any
) -> None:
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "Hi"},
    }
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.add(
        Reply(
            raw_sse=[
                "event: content_block_delta",
                f"data: {json.dumps(delta)}",
                "",
                "event: error",
                f"data: {json.dumps(error)}",
                "",
            ]
        )
    )
    with pytest.raises(ProviderError) as caught:
        await collect(make(server.url, sleep=sleeps))
    assert caught.value.kind == "stream_broken"
    assert sleeps.delays == []


async def test_stream_without_message_stop_is_broken(server: FakeLLMServer, sleeps: Any) -> None:
    server.add(Reply(text="abc", break_after=1))
    with pytest.raises(ProviderError) as caught:
        await collect(make(server.url, sleep=sleeps))
    assert caught.value.kind == "stream_broken"


async def test_pings_and_empty_deltas_do_not_keep_a_stream_alive(server: FakeLLMServer) -> None:
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}
    empties = [
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta"}},
    ]
    lines = ["event: message_start", f"data: {json.dumps(start)}", ""]
    for i in range(200):
        event = empties[i % len(empties)]
        lines += [f"event: {event['type']}", f"data: {json.dumps(event)}", ""]
    server.add(Reply(raw_sse=lines, chunk_delay=0.02))  # about 4 s of nothing, 20 ms apart
    with pytest.raises(ProviderError) as caught:
        await collect(make(server.url, idle_timeout=0.5))
    assert caught.value.kind == "timeout" and "sent nothing for 0.5 s" in caught.value.message


async def test_tool_input_fragments_keep_a_stream_alive(server: FakeLLMServer) -> None:
    # 40 fragments 0.05 s apart: 2 s in all, twice the idle timeout, each gap a twentieth of it
    # (a loaded machine stalled the stream past a 0.6 s timeout with gaps of 0.15 s).
    args = '{"q": "' + "fractions " * 40 + '"}'
    call = ToolCallSpec("search", args, id="t1", pieces=40)
    server.add(Reply(tool_calls=[call], chunk_delay=0.05))
    events = await collect(make(server.url, idle_timeout=1.0))
    end = events[-1]
    assert isinstance(end, RoundEnd) and end.tool_calls[0].arguments == args
