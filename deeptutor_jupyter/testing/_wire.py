"""What FakeLLMServer puts on the wire: OpenAI chat-completions and Anthropic Messages payloads.

Kept apart from the HTTP plumbing so the shapes can be read against the providers' documentation
line by line. Every stream is a finite list of SSE events; ``is_delta`` marks the events that
carry model output, which is what ``Reply.break_after`` counts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.testing._script import Reply, ToolCallSpec


@dataclass(frozen=True)
class Event:
    data: bytes
    is_delta: bool = False


def split_text(text: str, pieces: int = 4) -> list[str]:
    """Cut text into a few slices that join back exactly, so clients see several real deltas."""
    if not text:
        return []
    n = max(1, min(pieces, len(text)))
    size = -(-len(text) // n)
    return [text[i : i + size] for i in range(0, len(text), size)]


def arguments_text(call: ToolCallSpec) -> str:
    if isinstance(call.arguments, str):
        return call.arguments
    return json.dumps(call.arguments)


def text_chunks(reply: Reply) -> list[str]:
    return list(reply.chunks) if reply.chunks is not None else split_text(reply.text)


def usage_for(reply: Reply, body: Mapping[str, Any]) -> dict[str, int]:
    """The reply's scripted usage, or a deterministic word-count estimate when none was given."""
    if reply.usage is not None:
        prompt = int(reply.usage.get("prompt_tokens", 0))
        completion = int(reply.usage.get("completion_tokens", 0))
    else:
        prompt = len(json.dumps(body.get("messages", [])).split())
        completion = len(reply.text.split()) + len(reply.reasoning.split())
        completion += sum(len(arguments_text(c).split()) for c in reply.tool_calls)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


# --- OpenAI chat completions ---------------------------------------------------------------

_OPENAI_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def openai_error(status: int, message: str) -> dict[str, Any]:
    kind, code = _OPENAI_ERRORS.get(status, ("server_error" if status >= 500 else "error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def openai_finish_reason(reply: Reply) -> str:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_calls" if reply.tool_calls else "stop"


def _tool_call_id(call: ToolCallSpec, index: int, prefix: str) -> str:
    return call.id if call.id is not None else f"{prefix}{index}"


def openai_stream(reply: Reply, body: Mapping[str, Any], serial: int) -> list[Event]:
    head = {
        "id": f"chatcmpl-fake-{serial}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", ""),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, *, is_delta: bool = True) -> Event:
        payload = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return Event(f"data: {json.dumps(payload)}\n\n".encode(), is_delta)

    events = [chunk({"role": "assistant", "content": ""}, is_delta=False)]
    events += [chunk({"reasoning_content": p}) for p in split_text(reply.reasoning)]
    events += [chunk({"content": p}) for p in text_chunks(reply)]
    for index, call in enumerate(reply.tool_calls):
        first = {
            "index": index,
            "id": _tool_call_id(call, index, "call_fake_"),
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [first]}))
        for fragment in split_text(arguments_text(call), call.pieces):
            part = {"index": index, "function": {"arguments": fragment}}
            events.append(chunk({"tool_calls": [part]}))
    events.append(chunk({}, openai_finish_reason(reply), is_delta=False))
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        payload = {**head, "choices": [], "usage": usage_for(reply, body)}
        events.append(Event(f"data: {json.dumps(payload)}\n\n".encode()))
    events.append(Event(b"data: [DONE]\n\n"))
    return events


def openai_completion(reply: Reply, body: Mapping[str, Any], serial: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": _tool_call_id(call, i, "call_fake_"),
                "type": "function",
                "function": {"name": call.name, "arguments": arguments_text(call)},
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    return {
        "id": f"chatcmpl-fake-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": openai_finish_reason(reply)}],
        "usage": usage_for(reply, body),
    }


# --- Anthropic messages --------------------------------------------------------------------

_ANTHROPIC_ERRORS: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}

_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    kind = _ANTHROPIC_ERRORS.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def anthropic_stop_reason(reply: Reply) -> str:
    if reply.finish_reason is None:
        return "tool_use" if reply.tool_calls else "end_turn"
    return _STOP_REASONS.get(reply.finish_reason, reply.finish_reason)


def _tool_input(call: ToolCallSpec) -> Any:
    if not isinstance(call.arguments, str):
        return call.arguments
    try:
        return json.loads(call.arguments)
    except ValueError:
        return {}


def anthropic_stream(reply: Reply, body: Mapping[str, Any], serial: int) -> list[Event]:
    usage = usage_for(reply, body)

    def event(name: str, payload: dict[str, Any], *, is_delta: bool = False) -> Event:
        data = json.dumps({"type": name, **payload})
        return Event(f"event: {name}\ndata: {data}\n\n".encode(), is_delta)

    message = {
        "id": f"msg_fake_{serial}",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": body.get("model", ""),
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": 1},
    }
    events = [event("message_start", {"message": message}), event("ping", {})]
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if reply.reasoning:
        deltas = [{"type": "thinking_delta", "thinking": p} for p in split_text(reply.reasoning)]
        deltas.append({"type": "signature_delta", "signature": "fake-signature"})
        blocks.append(({"type": "thinking", "thinking": ""}, deltas))
    if text_chunks(reply):
        deltas = [{"type": "text_delta", "text": p} for p in text_chunks(reply)]
        blocks.append(({"type": "text", "text": ""}, deltas))
    for i, call in enumerate(reply.tool_calls):
        start = {"type": "tool_use", "id": _tool_call_id(call, i, "toolu_fake_"), "name": call.name}
        fragments = split_text(arguments_text(call), call.pieces)
        deltas = [{"type": "input_json_delta", "partial_json": f} for f in fragments]
        blocks.append(({**start, "input": {}}, deltas))
    for index, (start_block, deltas) in enumerate(blocks):
        events.append(event("content_block_start", {"index": index, "content_block": start_block}))
        events += [
            event("content_block_delta", {"index": index, "delta": d}, is_delta=True)
            for d in deltas
        ]
        events.append(event("content_block_stop", {"index": index}))
    stop = {"stop_reason": anthropic_stop_reason(reply), "stop_sequence": None}
    events.append(
        event(
            "message_delta", {"delta": stop, "usage": {"output_tokens": usage["completion_tokens"]}}
        )
    )
    events.append(event("message_stop", {}))
    return events


def anthropic_message(reply: Reply, body: Mapping[str, Any], serial: int) -> dict[str, Any]:
    usage = usage_for(reply, body)
    content: list[dict[str, Any]] = []
    if reply.reasoning:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "fake"})
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for i, call in enumerate(reply.tool_calls):
        tool_id = _tool_call_id(call, i, "toolu_fake_")
        content.append(
            {"type": "tool_use", "id": tool_id, "name": call.name, "input": _tool_input(call)}
        )
    return {
        "id": f"msg_fake_{serial}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": content,
        "stop_reason": anthropic_stop_reason(reply),
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage["prompt_tokens"],
            "output_tokens": usage["completion_tokens"],
        },
    }


def default_error_message(status: int) -> str:
    try:
        return f"FakeLLMServer: {HTTPStatus(status).phrase}"
    except ValueError:
        return f"FakeLLMServer: status {status}"


def raw_lines(lines: Sequence[str]) -> list[Event]:
    return [Event(f"{line}\n".encode(), is_delta=line.startswith("data:")) for line in lines]
