"""``FakeLLMServer.transport()``: the fake server's script answered in-process over httpx.

The same replies, the same wire format (``testing/_wire.py``) and the same request log as the
loopback server, without a socket or a thread: the chat loop's tests run faster and cannot be
disturbed by a busy machine. A deliberate drop (``break_after``) raises the protocol error httpx
raises for a body cut short on a real connection.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from deeptutor_jupyter.testing import _wire
from deeptutor_jupyter.testing._script import NO_REPLY_LEFT, RecordedRequest, Reply, Script, refusal


class FakeTransport(httpx.AsyncBaseTransport):
    def __init__(self, server: Script) -> None:
        self.server = server

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raw = await request.aread()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        recorded = RecordedRequest(
            method=request.method,
            path=request.url.path,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body if isinstance(body, dict) else {"_": body},
            query=dict(request.url.params),
        )
        self.server._record(recorded)
        if request.method == "GET" and recorded.path.endswith("/models"):
            names = self.server.models if self.server.models is not None else ["fake-model"]
            data = [{"id": n, "object": "model", "created": 0, "owned_by": "fake"} for n in names]
            return _json(200, {"object": "list", "data": data})
        anthropic = recorded.path.endswith("/messages")
        if not (anthropic or recorded.path.endswith("/chat/completions")):
            return _json(404, _wire.openai_error(404, f"Unknown path {recorded.path}"))
        return await self._answer(recorded, anthropic=anthropic)

    async def _answer(self, request: RecordedRequest, *, anthropic: bool) -> httpx.Response:
        error = _wire.anthropic_error if anthropic else _wire.openai_error
        refused = refusal(self.server, request, anthropic=anthropic)
        if refused is not None:
            return _json(refused[0], error(*refused))
        reply, serial = self.server._next_reply()
        if reply is None:
            return _json(500, error(500, NO_REPLY_LEFT))
        if reply.delay > 0:
            await asyncio.sleep(reply.delay)
        headers = dict(reply.headers or {})
        if reply.status != 200:
            if isinstance(reply.error, Mapping):
                payload: Any = dict(reply.error)
            else:
                payload = error(
                    reply.status, reply.error or _wire.default_error_message(reply.status)
                )
            return _json(reply.status, payload, headers)
        body = request.body
        if not body.get("stream") or reply.ignore_stream:
            build = _wire.anthropic_message if anthropic else _wire.openai_completion
            return _json(200, build(reply, body, serial), headers)
        if reply.raw_sse is not None:
            events = _wire.raw_lines(reply.raw_sse)
        elif anthropic:
            events = _wire.anthropic_stream(reply, body, serial)
        else:
            events = _wire.openai_stream(reply, body, serial)
        headers.update({"content-type": "text/event-stream", "cache-control": "no-cache"})
        return httpx.Response(200, headers=headers, stream=_Stream(events, reply))


class _Stream(httpx.AsyncByteStream):
    def __init__(self, events: list[_wire.Event], reply: Reply) -> None:
        self.events = events
        self.reply = reply

    async def __aiter__(self) -> AsyncIterator[bytes]:
        deltas = 0
        for i, event in enumerate(self.events):
            if event.is_delta:
                if self.reply.break_after is not None and deltas >= self.reply.break_after:
                    raise httpx.RemoteProtocolError("peer closed connection without sending body")
                hold = self.reply.hold
                if deltas == self.reply.hold_after and hold is not None:
                    while not hold.is_set():
                        await asyncio.sleep(0.02)
                deltas += 1
            if i and self.reply.chunk_delay > 0:
                await asyncio.sleep(self.reply.chunk_delay)
            yield event.data


def _json(status: int, payload: Any, headers: Mapping[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json=payload, headers=dict(headers or {}))
