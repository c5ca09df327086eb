"""The table of model endpoints the tutor knows, with what each one can and cannot do.

Capability bits are the starting point only: what a session learns from real error responses is
kept in :class:`~deeptutor_jupyter.providers.base.Compat`, so a wrong guess here costs one retry,
not a broken turn. This module is pure data and must stay free of heavy imports: ``config.py``
and ``%tutor config`` read it at extension load.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

ApiKind = Literal["openai", "anthropic"]
ThinkingStyle = Literal["none", "reasoning_content", "think_tags", "anthropic"]
MaxTokensParam = Literal["max_tokens", "max_completion_tokens"]
AuthHeader = Literal["bearer", "api-key", "x-api-key"]


@dataclass(frozen=True)
class ProviderSpec:
    name: str
    label: str
    api: ApiKind = "openai"
    aliases: tuple[str, ...] = ()
    default_base_url: str | None = None
    key_envs: tuple[str, ...] = ()
    needs_key: bool = True
    is_local: bool = False
    default_model: str | None = None
    supports_stream_options: bool = True
    supports_tools: bool = True
    max_tokens_param: MaxTokensParam = "max_tokens"
    # Only safe where the provider's own model names never contain "/" (OpenRouter, vLLM,
    # SiliconFlow and Groq use "org/model" names, so the slash there is part of the name).
    strip_model_prefix: bool = False
    thinking_style: ThinkingStyle = "none"
    docs_hint: str = ""
    auth_header: AuthHeader = "bearer"
    # Azure: the ``api-version`` query value; Anthropic: the ``anthropic-version`` header.
    api_version: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


PROVIDERS: tuple[ProviderSpec, ...] = (
    ProviderSpec(
        name="openai",
        label="OpenAI",
        default_base_url="https://api.openai.com/v1",
        key_envs=("OPENAI_API_KEY",),
        default_model="gpt-4o-mini",
        max_tokens_param="max_completion_tokens",
        strip_model_prefix=True,
        docs_hint="Create a key at https://platform.openai.com/api-keys",
    ),
    ProviderSpec(
        name="anthropic",
        label="Anthropic",
        api="anthropic",
        aliases=("claude",),
        default_base_url="https://api.anthropic.com/v1",
        key_envs=("ANTHROPIC_API_KEY",),
        default_model="claude-sonnet-4-5",
        supports_stream_options=False,
        strip_model_prefix=True,
        thinking_style="anthropic",
        docs_hint="Create a key at https://console.anthropic.com/settings/keys",
        auth_header="x-api-key",
        api_version="2023-06-01",
    ),
    ProviderSpec(
        name="deepseek",
        label="DeepSeek",
        default_base_url="https://api.deepseek.com/v1",
        key_envs=("DEEPSEEK_API_KEY",),
        default_model="deepseek-chat",
        strip_model_prefix=True,
        thinking_style="reasoning_content",
        docs_hint="Create a key at https://platform.deepseek.com/api_keys",
    ),
    ProviderSpec(
        name="openrouter",
        label="OpenRouter",
        default_base_url="https://openrouter.ai/api/v1",
        key_envs=("OPENROUTER_API_KEY",),
        default_model="openai/gpt-4o-mini",
        thinking_style="reasoning_content",
        docs_hint="Create a key at https://openrouter.ai/keys",
    ),
    ProviderSpec(
        name="azure",
        label="Azure OpenAI",
        aliases=("azure-openai", "azure_openai", "azureopenai"),
        # There is no shared endpoint: the base URL is the deployment's own, in the form
        # https://<resource>.openai.azure.com/openai/deployments/<deployment>; the model name
        # is the deployment name. ``api-version`` is appended unless the URL already has one.
        default_base_url=None,
        key_envs=("AZURE_OPENAI_API_KEY",),
        max_tokens_param="max_completion_tokens",
        strip_model_prefix=True,
        docs_hint=(
            "Base URL: https://<resource>.openai.azure.com/openai/deployments/<deployment>; "
            "key under Keys and Endpoint in the Azure portal"
        ),
        auth_header="api-key",
        api_version="2024-10-21",
    ),
    ProviderSpec(
        name="groq",
        label="Groq",
        default_base_url="https://api.groq.com/openai/v1",
        key_envs=("GROQ_API_KEY",),
        default_model="llama-3.3-70b-versatile",
        thinking_style="reasoning_content",
        docs_hint="Create a key at https://console.groq.com/keys",
    ),
    ProviderSpec(
        name="mistral",
        label="Mistral",
        aliases=("mistralai",),
        default_base_url="https://api.mistral.ai/v1",
        key_envs=("MISTRAL_API_KEY",),
        default_model="mistral-small-latest",
        # Mistral rejects the field but sends usage in the last chunk anyway.
        supports_stream_options=False,
        strip_model_prefix=True,
        docs_hint="Create a key at https://console.mistral.ai/api-keys",
    ),
    ProviderSpec(
        name="gemini",
        label="Google Gemini",
        aliases=("google", "google-gemini"),
        default_base_url="https://generativelanguage.googleapis.com/v1beta/openai",
        key_envs=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        default_model="gemini-2.0-flash",
        strip_model_prefix=True,
        docs_hint="Create a key at https://aistudio.google.com/apikey",
    ),
    ProviderSpec(
        name="dashscope",
        label="Alibaba DashScope (Qwen)",
        aliases=("qwen", "aliyun", "alibaba"),
        default_base_url="https://dashscope.aliyuncs.com/compatible-mode/v1",
        key_envs=("DASHSCOPE_API_KEY",),
        default_model="qwen-plus",
        strip_model_prefix=True,
        thinking_style="reasoning_content",
        docs_hint="Create a key at https://dashscope.console.aliyun.com/apiKey",
    ),
    ProviderSpec(
        name="moonshot",
        label="Moonshot (Kimi)",
        aliases=("kimi", "moonshotai"),
        default_base_url="https://api.moonshot.cn/v1",
        key_envs=("MOONSHOT_API_KEY",),
        default_model="moonshot-v1-8k",
        strip_model_prefix=True,
        thinking_style="reasoning_content",
        docs_hint="Create a key at https://platform.moonshot.cn/console/api-keys",
    ),
    ProviderSpec(
        name="zhipu",
        label="Zhipu AI (GLM)",
        aliases=("zhipuai", "glm", "bigmodel"),
        default_base_url="https://open.bigmodel.cn/api/paas/v4",
        key_envs=("ZHIPUAI_API_KEY", "ZHIPU_API_KEY"),
        default_model="glm-4-flash",
        supports_stream_options=False,
        strip_model_prefix=True,
        thinking_style="reasoning_content",
        docs_hint="Create a key at https://open.bigmodel.cn/usercenter/apikeys",
    ),
    ProviderSpec(
        name="siliconflow",
        label="SiliconFlow",
        aliases=("silicon-flow", "silicon"),
        default_base_url="https://api.siliconflow.cn/v1",
        key_envs=("SILICONFLOW_API_KEY",),
        default_model="Qwen/Qwen2.5-7B-Instruct",
        thinking_style="reasoning_content",
        docs_hint="Create a key at https://cloud.siliconflow.cn/account/ak",
    ),
    ProviderSpec(
        name="vllm",
        label="vLLM",
        default_base_url="http://localhost:8000/v1",
        key_envs=("VLLM_API_KEY",),
        needs_key=False,
        is_local=True,
        thinking_style="reasoning_content",
        docs_hint="vllm serve <model> --enable-auto-tool-choice --tool-call-parser <parser>",
    ),
    ProviderSpec(
        name="ollama",
        label="Ollama",
        default_base_url="http://localhost:11434/v1",
        key_envs=("OLLAMA_API_KEY",),
        needs_key=False,
        is_local=True,
        default_model="llama3.1",
        thinking_style="think_tags",
        docs_hint="ollama serve; ollama pull llama3.1",
    ),
    ProviderSpec(
        name="lmstudio",
        label="LM Studio",
        aliases=("lm-studio", "lm_studio"),
        default_base_url="http://localhost:1234/v1",
        key_envs=("LMSTUDIO_API_KEY",),
        needs_key=False,
        is_local=True,
        thinking_style="think_tags",
        docs_hint="In LM Studio, load a model and start the server (lms server start)",
    ),
    ProviderSpec(
        name="llamacpp",
        label="llama.cpp server",
        aliases=("llama.cpp", "llama-cpp", "llama_cpp", "llama-server"),
        default_base_url="http://localhost:8080/v1",
        key_envs=("LLAMACPP_API_KEY",),
        needs_key=False,
        is_local=True,
        thinking_style="reasoning_content",
        docs_hint="llama-server -m <model.gguf> --jinja --port 8080",
    ),
    # A JupyterHub course service (deeptutor_jupyter/hub/): the student's own hub token is the
    # key, and config.py selects it only when the hub's spawner set DEEPTUTOR_HUB_SERVICE_URL.
    ProviderSpec(
        name="hub",
        label="your course's tutor service",
        aliases=("course",),
        key_envs=("DEEPTUTOR_HUB_TOKEN", "JUPYTERHUB_API_TOKEN"),
        thinking_style="reasoning_content",
        docs_hint="Ask your instructor; the course's service is set up by your JupyterHub",
    ),
    ProviderSpec(
        name="openai-compatible",
        label="OpenAI-compatible server",
        aliases=("custom", "openai_compatible", "openai-compat", "compatible"),
        default_base_url=None,
        key_envs=("OPENAI_COMPATIBLE_API_KEY",),
        needs_key=False,
        thinking_style="reasoning_content",
        docs_hint="Set the base URL of your server, ending in /v1",
    ),
)

_BY_NAME: dict[str, ProviderSpec] = {n.lower(): spec for spec in PROVIDERS for n in spec.names}


def find_provider(name: str) -> ProviderSpec | None:
    """Look a provider up by canonical name or alias, ignoring case and surrounding spaces."""
    return _BY_NAME.get(name.strip().lower())


def provider_names() -> list[str]:
    return [spec.name for spec in PROVIDERS]


def api_key_from_env(spec: ProviderSpec, environ: Mapping[str, str] | None = None) -> str | None:
    """The first non-empty key among the spec's variables, in table order."""
    env = os.environ if environ is None else environ
    for var in spec.key_envs:
        value = env.get(var, "").strip()
        if value:
            return value
    return None
