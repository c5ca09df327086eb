"""Model endpoints behind one small seam (``ChatModel`` in ``base``).

Importing this package is free: the HTTP stack (httpx, httpx-sse) is only imported when a model
is made, so ``%load_ext`` and ``%tutor config`` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deeptutor_jupyter.lazy_names import lazy_names
from deeptutor_jupyter.providers.base import (
    ChatModel,
    ChatRequest,
    Compat,
    Message,
    ProviderError,
    ProviderEvent,
    RoundEnd,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolsUnsupportedError,
    Usage,
)
from deeptutor_jupyter.providers.httpx_cli import skip_unloadable_cli
from deeptutor_jupyter.providers.specs import (
    PROVIDERS,
    ProviderSpec,
    api_key_from_env,
    find_provider,
    provider_names,
)

# Every path of ours to httpx passes here first (~0.1 ms): see httpx_cli.py.
skip_unloadable_cli()

if TYPE_CHECKING:
    import httpx

    from deeptutor_jupyter.config import Settings
    from deeptutor_jupyter.providers.anthropic import AnthropicModel
    from deeptutor_jupyter.providers.openai_compat import OpenAICompatModel

__all__ = [
    "PROVIDERS",
    "AnthropicModel",
    "ChatModel",
    "ChatRequest",
    "Compat",
    "Message",
    "OpenAICompatModel",
    "ProviderError",
    "ProviderEvent",
    "ProviderSpec",
    "RoundEnd",
    "TextDelta",
    "ThinkingDelta",
    "ToolCall",
    "ToolsUnsupportedError",
    "Usage",
    "api_key_from_env",
    "find_provider",
    "make_model",
    "model_from_settings",
    "provider_names",
]


def make_model(
    *,
    provider: str,
    model: str,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 60.0,
    connect_timeout: float = 10.0,
    compat: Compat | None = None,
    client: httpx.AsyncClient | None = None,
    max_retries: int = 3,
    max_retry_wait: float = 60.0,
    idle_timeout: float | None = None,
    turn_deadline: float | None = None,
) -> ChatModel:
    """Build the model for a provider name or alias; nothing is contacted until it streams."""
    spec = find_provider(provider)
    if spec is None:
        known = ", ".join(provider_names())
        raise ValueError(f"Unknown provider {provider!r}. Known providers: {known}.")
    url = base_url or spec.default_base_url
    if not url:
        raise ValueError(f"{spec.label} needs a base URL: {spec.docs_hint}.")
    cls: type[OpenAICompatModel] | type[AnthropicModel]
    if spec.api == "anthropic":
        from deeptutor_jupyter.providers.anthropic import AnthropicModel as cls
    else:
        from deeptutor_jupyter.providers.openai_compat import OpenAICompatModel as cls
    return cls(
        spec,
        model=model,
        base_url=url,
        api_key=api_key,
        compat=compat,
        client=client,
        timeout=timeout,
        connect_timeout=connect_timeout,
        max_retries=max_retries,
        max_retry_wait=max_retry_wait,
        idle_timeout=idle_timeout,
        turn_deadline=turn_deadline,
    )


def model_from_settings(s: Settings) -> ChatModel:
    """The model of a learner's effective settings: provider, URL, key and every timeout."""
    return make_model(
        provider=s.provider or "",
        model=s.model or "",
        base_url=s.base_url,
        api_key=s.api_key.get_secret_value() if s.api_key is not None else None,
        timeout=s.timeout,
        connect_timeout=s.connect_timeout,
        idle_timeout=s.idle_timeout,
        turn_deadline=s.turn_deadline,
        max_retry_wait=s.max_retry_wait,
    )


__getattr__ = lazy_names(
    __name__, {"OpenAICompatModel": "openai_compat", "AnthropicModel": "anthropic"}
)
