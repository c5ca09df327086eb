"""The OpenAI chat-completions dialect, spoken by most endpoints in the provider table."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import EventSource

from deeptutor_jupyter.providers._http import (
    HTTPModel,
    drain,
    join_url,
    note_once,
    require_event_stream,
)
from deeptutor_jupyter.providers.base import (
    ChatRequest,
    Progress,
    ProviderEvent,
    RoundEnd,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolsUnsupportedError,
    Usage,
)
from deeptutor_jupyter.providers.errors import (
    Endpoint,
    HTTPStatusFailure,
    IncompleteStream,
    is_stream_options_rejection,
    is_tools_rejection,
    malformed,
    provider_message,
    status_from_stream_error,
)
from deeptutor_jupyter.providers.retry import RetryNow


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallAssembler:
    """Joins streamed tool-call fragments by their ``index``, as the OpenAI protocol sends them."""

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}

    def add(self, fragment: dict[str, Any]) -> None:
        index = fragment.get("index")
        if not isinstance(index, int):
            # Some servers omit the index; a new id then means a new call.
            fresh = fragment.get("id") and all(c.id != fragment["id"] for c in self._calls.values())
            index = len(self._calls) if fresh or not self._calls else max(self._calls)
        call = self._calls.setdefault(index, _PartialCall())
        if fragment.get("id") and not call.id:
            call.id = str(fragment["id"])
        function = fragment.get("function") or {}
        if function.get("name") and not call.name:
            call.name = str(function["name"])
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call.arguments.append(arguments)
        elif arguments is not None:
            call.arguments.append(json.dumps(arguments))

    def finish(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(
                # Ids must be unique across the whole conversation, not just this round:
                # a history that repeats one is rejected by some providers later.
                id=call.id or f"call_{uuid.uuid4().hex[:12]}_{index}",
                name=call.name,
                arguments="".join(call.arguments) or "{}",
            )
            for index, call in sorted(self._calls.items())
        )


def _usage(data: Any) -> Usage | None:
    if not isinstance(data, dict):
        return None
    return Usage(
        prompt_tokens=int(data.get("prompt_tokens") or 0),
        completion_tokens=int(data.get("completion_tokens") or 0),
    )


class OpenAICompatModel(HTTPModel):
    """A chat-completions endpoint streamed over SSE; learns and remembers what it rejects."""

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._api_key:
            if self.spec.auth_header == "api-key":
                headers["api-key"] = self._api_key
            else:
                headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _url(self) -> str:
        # Azure's deployment URLs need an api-version; one already in the base URL wins.
        params = {}
        if self.spec.auth_header == "api-key" and self.spec.api_version:
            params["api-version"] = self.spec.api_version
        return join_url(self.base_url, "/chat/completions", params)

    def build_body(self, request: ChatRequest, model: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": request.messages, "stream": True}
        if self.compat.stream_options:
            body["stream_options"] = {"include_usage": True}
        if request.tools and self.compat.native_tools:
            body["tools"] = request.tools
        if request.max_tokens is not None:
            body[self.spec.max_tokens_param] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        return body

    async def _attempt(
        self, request: ChatRequest, model: str, endpoint: Endpoint
    ) -> AsyncIterator[ProviderEvent | Progress]:
        body = self.build_body(request, model)
        headers = self._headers()
        if request.exercise and self.spec.name == "hub":
            # Only the course's service counts hints; no other endpoint learns the notebook.
            headers["X-DeepTutor-Exercise"] = request.exercise
        try:
            async with self._post_stream(self._url(), headers, body) as response:
                async for event in self._read(response, endpoint):
                    yield event
        except HTTPStatusFailure as failure:
            self._degrade(failure, body, endpoint)
            raise

    def _degrade(
        self, failure: HTTPStatusFailure, body: dict[str, Any], endpoint: Endpoint
    ) -> None:
        """Turn off what the endpoint just refused, so this session never sends it again."""
        if "stream_options" in body and is_stream_options_rejection(failure.status, failure.body):
            self.compat.stream_options = False
            note_once(
                self.compat, f"{self.spec.label} rejected stream_options; usage not requested."
            )
            raise RetryNow from failure
        if "tools" in body and is_tools_rejection(failure.status, failure.body):
            self.compat.native_tools = False
            note_once(
                self.compat, f"{self.spec.label} rejected tool schemas; using text tool calls."
            )
            said = endpoint.scrub(provider_message(failure.body))
            raise ToolsUnsupportedError(
                f"{self.spec.label} does not accept tool definitions for '{endpoint.model}'"
                + (f": {said}" if said else "."),
                hint="Tools will be described in the prompt instead.",
                status=failure.status,
                provider=self.spec.name,
                url=endpoint.scrub(endpoint.url),
                model=endpoint.model,
            ) from failure

    async def _read(
        self, response: httpx.Response, endpoint: Endpoint
    ) -> AsyncIterator[ProviderEvent | Progress]:
        if response.headers.get("content-type", "").startswith("application/json"):
            # The server ignored "stream": true and answered in one piece.
            await response.aread()
            for event in self._from_completion(response, endpoint):
                yield event
            return
        require_event_stream(response, endpoint)
        tools = ToolCallAssembler()
        finish_reason: str | None = None
        usage: Usage | None = None
        done = False
        events = EventSource(response).aiter_sse()
        async for sse in events:
            if sse.data.strip() == "[DONE]":
                done = True
                break
            if not sse.data.strip():
                continue
            chunk = self._parse(sse.data, endpoint)
            if "error" in chunk:
                error = chunk["error"]
                status = status_from_stream_error(error)
                raise HTTPStatusFailure(status, json.dumps({"error": error}))
            usage = (
                _usage(chunk.get("usage"))
                or _usage((chunk.get("x_groq") or {}).get("usage"))
                or usage
            )
            shown = moved = False
            for choice in chunk.get("choices") or []:
                if choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta") or {}
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    shown = True
                    yield ThinkingDelta(reasoning)
                content = delta.get("content")
                if isinstance(content, str) and content:
                    shown = True
                    yield TextDelta(content)
                for fragment in delta.get("tool_calls") or []:
                    tools.add(fragment)
                    moved = moved or _has_bytes(fragment)
                finish_reason = choice.get("finish_reason") or finish_reason
            if moved and not shown:
                # Bytes of a tool call: not idle. Chunks without choices, `delta: {}` or
                # `content: ""` are not progress, so they cannot keep a stalled stream open.
                yield Progress()
        if not done and finish_reason is None:
            raise IncompleteStream("the stream ended before the answer was complete")
        if done:
            await drain(events)
        yield RoundEnd(finish_reason, tools.finish(), usage)

    @staticmethod
    def _parse(data: str, endpoint: Endpoint) -> dict[str, Any]:
        try:
            chunk = json.loads(data)
        except ValueError:
            raise malformed(endpoint, f"an event is not JSON: {data[:80]!r}") from None
        if not isinstance(chunk, dict):
            raise malformed(endpoint, f"an event is not a JSON object: {data[:80]!r}")
        return chunk

    def _from_completion(self, response: httpx.Response, endpoint: Endpoint) -> list[ProviderEvent]:
        body = self._parse(response.text, endpoint)
        choices = body.get("choices") or [{}]
        message = choices[0].get("message") or {}
        events: list[ProviderEvent] = []
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            events.append(ThinkingDelta(reasoning))
        if isinstance(message.get("content"), str) and message["content"]:
            events.append(TextDelta(message["content"]))
        tools = ToolCallAssembler()
        for index, call in enumerate(message.get("tool_calls") or []):
            tools.add({"index": index, **call})
        finish = choices[0].get("finish_reason")
        events.append(RoundEnd(finish, tools.finish(), _usage(body.get("usage"))))
        return events


def _has_bytes(fragment: Any) -> bool:
    """A tool-call fragment that carries part of the call (its name or its arguments)."""
    function = fragment.get("function") if isinstance(fragment, dict) else None
    return isinstance(function, dict) and bool(function.get("name") or function.get("arguments"))
