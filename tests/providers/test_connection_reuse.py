"""Rounds of one session share a connection: a new TLS handshake per round is what we avoid."""

from __future__ import annotations

from deeptutor_jupyter.providers import make_model
from deeptutor_jupyter.providers.base import ChatRequest, RoundEnd
from deeptutor_jupyter.testing import FakeLLMServer, Reply


async def _round(model, text: str) -> RoundEnd:
    request = ChatRequest(model="fake-model", messages=[{"role": "user", "content": text}])
    events = [e async for e in model.stream(request)]
    assert isinstance(events[-1], RoundEnd)
    return events[-1]


async def test_openai_compatible_rounds_reuse_one_connection():
    with FakeLLMServer([Reply(text="one"), Reply(text="two"), Reply(text="three")]) as server:
        model = make_model(provider="custom", model="fake-model", base_url=server.url)
        try:
            for text in ("a", "b", "c"):
                await _round(model, text)
        finally:
            await model.aclose()
        ports = {r.client_port for r in server.requests}
        assert len(server.requests) == 3 and len(ports) == 1, ports


async def test_anthropic_rounds_reuse_one_connection():
    with FakeLLMServer([Reply(text="one"), Reply(text="two")]) as server:
        model = make_model(provider="anthropic", model="claude-x", base_url=server.url, api_key="k")
        try:
            await _round(model, "a")
            await _round(model, "b")
        finally:
            await model.aclose()
        assert len({r.client_port for r in server.requests}) == 1


async def test_tool_calls_without_ids_get_ids_unique_across_rounds():
    chunk = (
        'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
        '"function":{"name":"calculate","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}\n\n'
    )
    raw = [chunk, "data: [DONE]\n\n"]
    with FakeLLMServer([Reply(raw_sse=raw), Reply(raw_sse=raw)]) as server:
        model = make_model(provider="custom", model="fake-model", base_url=server.url)
        try:
            first = await _round(model, "a")
            second = await _round(model, "b")
        finally:
            await model.aclose()
    assert first.tool_calls[0].id != second.tool_calls[0].id
    assert first.tool_calls[0].name == "calculate"
