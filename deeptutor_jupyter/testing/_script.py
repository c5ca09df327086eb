"""What the loopback server and the in-process transport share: the request log's record, the
refusals (a wrong key, an unknown model) and the word for a script that ran out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.testing.fake_llm import FakeLLMServer

NO_REPLY_LEFT = "FakeLLMServer: no scripted reply left"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    query: dict[str, str] = field(default_factory=dict)
    client_port: int = 0  # the same port twice means the client reused its connection


def refusal(
    owner: FakeLLMServer, request: RecordedRequest, *, anthropic: bool
) -> tuple[int, str] | None:
    """(status, message) when the server refuses this request (key, model), else None."""
    if owner.api_key is not None:
        if anthropic:
            sent = request.headers.get("x-api-key")
        else:
            bearer = request.headers.get("authorization", "")
            sent = bearer[7:] if bearer.startswith("Bearer ") else request.headers.get("api-key")
        if sent != owner.api_key:
            if anthropic:
                return 401, "invalid x-api-key"
            if not sent:
                return 401, "You didn't provide an API key."
            masked = f"{sent[:3]}***{sent[-4:]}" if len(sent) > 8 else "***"
            return 401, f"Incorrect API key provided: {masked}."
    model = request.body.get("model")
    if owner.models is not None and model not in owner.models:
        if anthropic:
            return 404, f"model: {model}"
        return 404, f"The model `{model}` does not exist or you do not have access to it."
    return None
