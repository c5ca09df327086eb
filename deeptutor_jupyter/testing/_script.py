"""What the loopback server and the in-process transport share: the script's replies, the
request log's record, the refusals (a wrong key, an unknown model) and the word for a script
that ran out. The lowest module of ``testing``: the server, the wire and the transport import
it, it imports none of them (``Script`` is what the transport needs of the server)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

NO_REPLY_LEFT = "FakeLLMServer: no scripted reply left"


@dataclass(frozen=True)
class ToolCallSpec:
    """A tool call to stream. A ``str`` for ``arguments`` is sent verbatim (e.g. invalid JSON)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    pieces: int = 3  # the argument deltas it is streamed in (each after ``chunk_delay``)


@dataclass(frozen=True)
class Reply:
    """One scripted answer; see ``docs/testing.md`` for what each field does on the wire."""

    text: str = ""
    chunks: Sequence[str] | None = None
    reasoning: str = ""
    tool_calls: Sequence[ToolCallSpec] = ()
    finish_reason: str | None = None
    status: int = 200
    error: str | Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    break_after: int | None = None
    usage: Mapping[str, int] | None = None
    raw_sse: Sequence[str] | None = None
    # Answer with one JSON body even to a streaming request, as some servers do.
    ignore_stream: bool = False
    # Misbehave on the wire (see deeptutor_jupyter/testing/faults.py): "reset" ends the stream
    # with a TCP reset after ``break_after`` deltas, "stall" sends the headers and then nothing,
    # "keepalive" sends only SSE comments (every ``chunk_delay``, 0.2 s by default), "empty" only
    # chunks that carry nothing (no choices, ``delta: {}``, ``content: ""``). The last three go
    # on until the client hangs up or the server stops.
    fault: str | None = None
    # Send ``hold_after`` output deltas, then wait until ``hold`` is set before the rest: a
    # test looks at what a frontend shows mid-answer without racing the stream.
    hold_after: int | None = None
    hold: threading.Event | None = field(default=None, compare=False)


class Script(Protocol):
    """The server's script as the in-process transport and the refusals use it."""

    api_key: str | None
    models: list[str] | None

    def _record(self, request: RecordedRequest) -> None: ...

    def _next_reply(self) -> tuple[Reply | None, int]: ...


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    query: dict[str, str] = field(default_factory=dict)
    client_port: int = 0  # the same port twice means the client reused its connection
    # When the server had read it, on time.monotonic()'s clock: the same in every process of the
    # machine, so a benchmark compares it with the moment a kernel asked.
    received: float = field(default_factory=time.monotonic)


def refusal(owner: Script, request: RecordedRequest, *, anthropic: bool) -> tuple[int, str] | None:
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
