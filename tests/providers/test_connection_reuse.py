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
