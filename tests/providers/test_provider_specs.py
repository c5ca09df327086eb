from __future__ import annotations

import pytest

from deeptutor_jupyter.providers.specs import (
    PROVIDERS,
    api_key_from_env,
    find_provider,
    provider_names,
)

REQUIRED = [
    "openai",
    "deepseek",
    "openrouter",
    "azure",
    "groq",
    "mistral",
    "gemini",
    "dashscope",
    "moonshot",
    "zhipu",
    "siliconflow",
    "vllm",
    "ollama",
    "lmstudio",
    "llamacpp",
    "openai-compatible",
    "anthropic",
]


def test_table_covers_the_required_providers() -> None:
    assert set(REQUIRED) <= set(provider_names())


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("azure", "azure"),
        ("google", "gemini"),
        ("Gemini", "gemini"),
        ("claude", "anthropic"),
        ("custom", "openai-compatible"),
        ("openai-compatible", "openai-compatible"),
        ("lm-studio", "lmstudio"),
        ("lmstudio", "lmstudio"),
        ("llamacpp", "llamacpp"),
        ("llama.cpp", "llamacpp"),
        ("  OLLAMA ", "ollama"),
    ],
)
def test_aliases_resolve_case_insensitively(alias: str, canonical: str) -> None:
    spec = find_provider(alias)
    assert spec is not None
    assert spec.name == canonical


def test_unknown_provider_is_none() -> None:
    assert find_provider("no-such-llm") is None


def test_names_and_aliases_are_unique() -> None:
    names = [n.lower() for spec in PROVIDERS for n in spec.names]
    assert len(names) == len(set(names))


def test_local_servers_need_no_key_and_have_a_start_hint() -> None:
    for spec in PROVIDERS:
        if spec.is_local:
            assert not spec.needs_key
            assert spec.default_base_url and spec.default_base_url.startswith("http://localhost")
        assert spec.docs_hint
        assert spec.key_envs


def test_only_anthropic_speaks_the_messages_api() -> None:
    assert [s.name for s in PROVIDERS if s.api == "anthropic"] == ["anthropic"]


def test_api_key_from_env_takes_the_first_set_variable() -> None:
    spec = find_provider("gemini")
    assert spec is not None
    assert api_key_from_env(spec, {"GOOGLE_API_KEY": "g"}) == "g"
    assert api_key_from_env(spec, {"GEMINI_API_KEY": "a", "GOOGLE_API_KEY": "g"}) == "a"
    assert api_key_from_env(spec, {"GEMINI_API_KEY": "  "}) is None
