"""Anthropic's Messages API, spoken natively and translated to and from the OpenAI message shape.

The rest of the tutor stores and replays OpenAI-format messages, so the translation lives here at
the edge, in both directions: messages and tool schemas out, content blocks and stop reasons in.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import EventSource

from deeptutor_jupyter.providers._http import HTTPModel, drain, join_url, require_event_stream
from deeptutor_jupyter.providers.base import (
    ChatRequest,
    Message,
    Progress,
    ProviderEvent,
    RoundEnd,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    Usage,
)
from deeptutor_jupyter.providers.errors import (
    Endpoint,
    HTTPStatusFailure,
    IncompleteStream,
    malformed,
    status_from_stream_error,
)

DEFAULT_MAX_TOKENS = 4096

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _image_block(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": url}}


def _content_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str) or content is None:
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content:
        if part.get("type") == "text" and part.get("text"):
            blocks.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url", "") if isinstance(image, dict) else str(image)
            blocks.append(_image_block(url))
    return blocks


def _tool_input(arguments: str) -> Any:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        # The model wrote invalid JSON last time; keep its text so the transcript stays honest.
        return {"raw_arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


def to_anthropic_messages(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Split out the system prompt and map OpenAI-format messages to Messages API turns."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(_text_of(message.get("content")))
            continue
        if role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id", ""),
                "content": _text_of(message.get("content")),
            }
            role, blocks = "user", [block]
        elif role == "assistant":
            blocks = _content_blocks(message.get("content"))
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id", ""),
                        "name": function.get("name", ""),
                        "input": _tool_input(function.get("arguments", "")),
                    }
                )
        else:
            role, blocks = "user", _content_blocks(message.get("content"))
        if not blocks:
            continue
        # The API insists on alternating roles; tool results following each other are one turn.
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(s for s in system if s), turns


def to_anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    converted = []
    for tool in tools:
        function = tool.get("function", tool)
        spec: dict[str, Any] = {
            "name": function["name"],
            "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
        }
        if function.get("description"):
            spec["description"] = function["description"]
        converted.append(spec)
    return converted


@dataclass
class _Round:
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    saw_usage: bool = False
    done: bool = False
    tools: dict[int, tuple[str, str, list[str]]] = field(default_factory=dict)

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(id=tool_id, name=name, arguments="".join(parts) or "{}")
            for _, (tool_id, name, parts) in sorted(self.tools.items())
        )

    def usage(self) -> Usage | None:
        if not self.saw_usage:
            return None
        return Usage(prompt_tokens=self.input_tokens, completion_tokens=self.output_tokens)


class AnthropicModel(HTTPModel):
    """Claude over the native Messages API, streamed as server-sent events."""

    def _headers(self) -> dict[str, str]:
        headers = {
            "Accept": "text/event-stream",
            "anthropic-version": self.spec.api_version or "2023-06-01",
        }
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def build_body(self, request: ChatRequest, model: str) -> dict[str, Any]:
        system, messages = to_anthropic_messages(request.messages)
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": messages,
            "stream": True,
        }
        if system:
            body["system"] = system
        if request.tools and self.compat.native_tools:
            body["tools"] = to_anthropic_tools(request.tools)
        if request.temperature is not None:
            body["temperature"] = request.temperature
        return body

    async def _attempt(
        self, request: ChatRequest, model: str, endpoint: Endpoint
    ) -> AsyncIterator[ProviderEvent | Progress]:
        body = self.build_body(request, model)
        url = join_url(self.base_url, "/messages")
        async with self._post_stream(url, self._headers(), body) as response:
            async for event in self._read(response, endpoint):
                yield event

    async def _read(
        self, response: httpx.Response, endpoint: Endpoint
    ) -> AsyncIterator[ProviderEvent | Progress]:
        require_event_stream(response, endpoint)
        state = _Round()
        events = EventSource(response).aiter_sse()
        async for sse in events:
            if not sse.data.strip():
                continue
            try:
                data = json.loads(sse.data)
            except ValueError:
                raise malformed(endpoint, f"an event is not JSON: {sse.data[:80]!r}") from None
            if not isinstance(data, dict):
                raise malformed(endpoint, f"an event is not a JSON object: {sse.data[:80]!r}")
            for event in self._handle(data, state):
                yield event
            if state.done:
                break
        if not state.done:
            raise IncompleteStream("the stream ended before message_stop")
        await drain(events)
        yield RoundEnd(state.finish_reason, state.tool_calls(), state.usage())

    @staticmethod
    def _handle(data: dict[str, Any], state: _Round) -> list[ProviderEvent | Progress]:
        """The events of one SSE event. Progress only for bytes of an answer (a tool's name or
        input): pings, empty deltas and bookkeeping events do not keep an idle stream alive."""
        kind = data.get("type")
        if kind == "message_start":
            usage = (data.get("message") or {}).get("usage") or {}
            state.input_tokens = int(usage.get("input_tokens") or 0)
            state.output_tokens = int(usage.get("output_tokens") or 0)
            state.saw_usage = bool(usage)
        elif kind == "content_block_start":
            block = data.get("content_block") or {}
            if block.get("type") == "tool_use":
                state.tools[int(data.get("index", 0))] = (
                    block.get("id", ""),
                    block.get("name", ""),
                    [],
                )
                return [Progress()] if block.get("name") else []
            elif block.get("type") == "text" and block.get("text"):
                return [TextDelta(block["text"])]
        elif kind == "content_block_delta":
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                return [TextDelta(delta["text"])]
            if delta.get("type") == "thinking_delta" and delta.get("thinking"):
                return [ThinkingDelta(delta["thinking"])]
            if delta.get("type") == "input_json_delta":
                slot = state.tools.get(int(data.get("index", 0)))
                if slot is not None and delta.get("partial_json"):
                    slot[2].append(delta["partial_json"])
                    return [Progress()]
        elif kind == "message_delta":
            stop = (data.get("delta") or {}).get("stop_reason")
            state.finish_reason = _FINISH.get(stop, stop) if stop else state.finish_reason
            usage = data.get("usage") or {}
            if "output_tokens" in usage:
                state.output_tokens = int(usage["output_tokens"] or 0)
                state.saw_usage = True
        elif kind == "message_stop":
            state.done = True
        elif kind == "error":
            error = data.get("error") or {}
            raise HTTPStatusFailure(status_from_stream_error(error), json.dumps(data))
        return []
