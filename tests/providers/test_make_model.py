from __future__ import annotations

import subprocess
import sys

import pytest

import deeptutor_jupyter.providers as providers
from deeptutor_jupyter.providers import ChatRequest, Compat, TextDelta, make_model
from deeptutor_jupyter.providers.anthropic import AnthropicModel
from deeptutor_jupyter.providers.openai_compat import OpenAICompatModel
from deeptutor_jupyter.testing import FakeLLMServer, Reply


def test_importing_the_provider_layer_does_not_import_httpx() -> None:
    code = (
        "import sys, deeptutor_jupyter.providers as p, deeptutor_jupyter.testing;"
        "p.find_provider('openai');"
        "assert 'httpx' not in sys.modules and 'httpx_sse' not in sys.modules, 'eager import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_provider_is_a_clear_value_error() -> None:
    with pytest.raises(ValueError, match=r"Unknown provider 'nope'\. Known providers: openai"):
        make_model(provider="nope", model="m")


def test_provider_without_default_url_needs_one() -> None:
    with pytest.raises(ValueError, match="needs a base URL"):
        make_model(provider="custom", model="m")


async def test_picks_the_class_by_api_and_uses_defaults() -> None:
    claude = make_model(provider="Claude", model="claude-x", api_key="k")
    assert isinstance(claude, AnthropicModel)
    assert claude.base_url == "https://api.anthropic.com/v1"
    lm = make_model(provider="lm-studio", model="qwen/qwen3-4b")
    assert isinstance(lm, OpenAICompatModel)
    assert lm.base_url == "http://localhost:1234/v1"
    assert lm.provider == "lmstudio"
    assert providers.OpenAICompatModel is OpenAICompatModel
    await claude.aclose()
    await lm.aclose()


async def test_made_model_streams_from_the_fake_server(server: FakeLLMServer) -> None:
    import httpx

    server.add(Reply(text="hello"))
    compat = Compat()
    async with httpx.AsyncClient() as client:
        model = make_model(
            provider="openai-compatible",
            model="local",
            base_url=server.url,
            compat=compat,
            client=client,
            timeout=5,
        )
        assert model.compat is compat
        request = ChatRequest(model="local", messages=[{"role": "user", "content": "hi"}])
        events = [e async for e in model.stream(request)]
        await model.aclose()
        assert not client.is_closed
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello"


def test_exported_names() -> None:
    for name in providers.__all__:
        assert getattr(providers, name) is not None
