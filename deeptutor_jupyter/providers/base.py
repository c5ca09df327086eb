"""The seam between the chat loop and every model endpoint.

Messages and tool calls are the typed shapes of ``deeptutor_jupyter/messages.py``; providers
that speak another wire format (Anthropic) translate at their edge.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.messages import Message, ToolCall

__all__ = ["Message", "ToolCall"]  # re-exported: most callers know them from here

# Called when a request made under it is on the wire (its body written; providers/_http.py).
# A kernel's first turn sets it while it starts the turn, so that the turn's task (which
# copies the context it was created in) and no other calls it, and builds the cell's view
# then, while the model thinks, rather than before the question leaves (kernel/start.py).
REQUEST_SENT: ContextVar[Callable[[], None] | None] = ContextVar("request_sent", default=None)

ErrorKind = Literal[
    "auth",  # 401/403: the key was rejected
    "not_found",  # 404: wrong model name or wrong URL
    "connection",  # nothing listening, DNS failure, TLS failure
    "timeout",
    "rate_limit",  # 429 after retries
    "server",  # 5xx after retries
    "bad_request",  # 400 the provider would not accept
    "stream_broken",  # the connection dropped after output had started
    "malformed",  # the reply was not what the protocol promises
    "policy",  # the instructor's AI policy: nothing was sent (runtime/policy_gate.py)
]


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ThinkingDelta:
    """Reasoning the endpoint sent on its own channel (``reasoning_content``, thinking blocks)."""

    text: str


@dataclass(frozen=True)
class RoundEnd:
    """Always the last item of a stream: what the round came to."""

    finish_reason: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None


@dataclass(frozen=True)
class Waiting:
    """The endpoint asked us to wait (429, 503) and a retry follows in ``seconds``.

    Not content: the loop shows it on the status line ("rate limited by X, retrying in N s").
    """

    seconds: float
    reason: str  # the words for the status line, e.g. "rate limited by OpenAI"
    status: int | None = None


@dataclass(frozen=True)
class Progress:
    """The stream sent part of the answer that is not shown (a tool call's name or arguments).

    Resets the idle timeout in providers/retry.py, which drops it. Keep-alive comments, pings,
    empty chunks and usage-only chunks are not progress and do not reset it.
    """


ProviderEvent = TextDelta | ThinkingDelta | RoundEnd | Waiting


@dataclass
class ChatRequest:
    model: str
    messages: list[Message]
    # OpenAI function-tool schemas:
    # {"type": "function", "function": {name, description, parameters}}
    tools: list[dict[str, Any]] | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    # The exercise a question is about ("lesson.ipynb#cell-id"): the course service counts the
    # hints cap per student and exercise (hub/hints.py). Sent to that service only.
    exercise: str | None = None


@dataclass
class Compat:
    """What this session has learned about the endpoint; degradations are remembered here."""

    stream_options: bool = True
    native_tools: bool = True
    notes: list[str] = field(default_factory=list)


class ProviderError(DeepTutorError):
    """A failure worded for the learner: what happened and how to fix it."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        hint: str = "",
        status: int | None = None,
        provider: str = "",
        url: str = "",
        model: str = "",
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.code = kind
        self.message = message
        self.hint = hint
        self.status = status
        self.provider = provider
        self.url = url
        self.model = model


class ToolsUnsupportedError(ProviderError):
    """The endpoint refused tool schemas; the loop switches to text tool calls and retries."""

    def __init__(self, message: str, **kw: Any) -> None:
        super().__init__("bad_request", message, **kw)


class ChatModel(Protocol):
    """A model endpoint. ``stream`` yields deltas and ends with exactly one ``RoundEnd``."""

    provider: str
    model: str
    compat: Compat

    def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]: ...

    async def aclose(self) -> None: ...
