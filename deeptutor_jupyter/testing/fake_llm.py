"""A scripted, loopback LLM endpoint for tests, notebooks and benchmarks.

It speaks OpenAI chat completions (``/chat/completions``) and Anthropic Messages (``/messages``)
over real HTTP so the whole provider stack runs unchanged, and it records every request so a test
can assert on what was actually sent. It uses only the standard library and its own threads: it
must work from pytest, from inside a running IPython kernel (whose event loop is busy) and from a
plain script alike.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from deeptutor_jupyter.testing import _wire
from deeptutor_jupyter.testing._script import (
    NO_REPLY_LEFT,
    RecordedRequest,
    Reply,
    ToolCallSpec,
    refusal,
)

__all__ = ["FakeLLMServer", "RecordedRequest", "Reply", "ToolCallSpec"]

# What the "empty" fault sends, in turn: valid OpenAI-style chunks that carry nothing.
_EMPTY_CHUNKS = (
    b'data: {"choices": []}\n\n',
    b'data: {"choices": [{"index": 0, "delta": {}}]}\n\n',
    b'data: {"choices": [{"index": 0, "delta": {"content": ""}}]}\n\n',
)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, owner: FakeLLMServer) -> None:
        self.owner = owner
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client hanging up mid-stream is normal here (cancelled turns, timeouts under test);
        # the default handler would print a traceback into the test output.
        pass

    def drop_all(self) -> None:
        with self.sockets_lock:
            sockets = list(self.open_sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class FakeLLMServer:
    """OpenAI-compatible (and Anthropic Messages) server on 127.0.0.1 replaying scripted replies.

    ``api_key`` makes a wrong or missing key get a realistic 401; ``models`` makes an unknown model
    get a realistic 404. Those rejections do not consume a scripted reply, as a real endpoint
    rejects them before generating anything.
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        api_key: str | None = None,
        models: Sequence[str] | None = None,
    ) -> None:
        self.api_key = api_key
        self.models = list(models) if models is not None else None
        self._queue: deque[Reply] = deque(replies)
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._serial = 0
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._port: int | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeLLMServer:
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server(self)
        self._port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="FakeLLMServer",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        server.drop_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port it listens on; still answers after stop() so tests can check for refusal."""
        if self._port is None:
            raise RuntimeError("FakeLLMServer has not been started; call start() first")
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def add(self, reply: Reply) -> None:
        with self._lock:
            self._queue.append(reply)

    def extend(self, replies: Iterable[Reply]) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """How many scripted replies have not been served yet."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next_reply(self) -> tuple[Reply | None, int]:
        with self._lock:
            self._serial += 1
            return (self._queue.popleft() if self._queue else None), self._serial

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops meanwhile; False means stop now."""
        return seconds <= 0 or not self._stopping.wait(seconds)

    def transport(self) -> Any:
        """An httpx transport that answers in-process from the same script and records the
        same requests, like httpx's ``MockTransport``: no socket, for fast loop tests.
        Use it as ``httpx.AsyncClient(transport=server.transport())``."""
        from deeptutor_jupyter.testing.transport import FakeTransport  # httpx, only when asked

        return FakeTransport(self)

    def __repr__(self) -> str:
        where = self.url if self._server is not None else "stopped"
        return f"<FakeLLMServer {where} pending={self.pending} requests={len(self.requests)}>"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Without TCP_NODELAY the last chunk of a reply waits for the client's delayed ACK (~40 ms).
    disable_nagle_algorithm = True
    # Bounds how long an idle keep-alive connection can hold a thread.
    timeout = 30
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def owner(self) -> FakeLLMServer:
        return self.server.owner

    def do_GET(self) -> None:
        request = self._read_request()
        if request.path.endswith("/models"):
            names = self.owner.models if self.owner.models is not None else ["fake-model"]
            data = [{"id": n, "object": "model", "created": 0, "owned_by": "fake"} for n in names]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, _wire.openai_error(404, f"Unknown path {request.path}"))

    def do_POST(self) -> None:
        request = self._read_request()
        if request.path.endswith("/chat/completions"):
            self._answer(request, anthropic=False)
        elif request.path.endswith("/messages"):
            self._answer(request, anthropic=True)
        else:
            self._send_json(404, _wire.openai_error(404, f"Unknown path {request.path}"))

    def _read_request(self) -> RecordedRequest:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        parts = urlsplit(self.path)
        request = RecordedRequest(
            method=self.command,
            path=parts.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body if isinstance(body, dict) else {"_": body},
            query=dict(parse_qsl(parts.query)),
            client_port=int(self.client_address[1]),
        )
        self.owner._record(request)
        return request

    def _answer(self, request: RecordedRequest, *, anthropic: bool) -> None:
        error = _wire.anthropic_error if anthropic else _wire.openai_error
        rejection = self._reject(request, anthropic=anthropic)
        if rejection is not None:
            status, message = rejection
            self._send_json(status, error(status, message))
            return
        reply, serial = self.owner._next_reply()
        if reply is None:
            self._send_json(500, error(500, NO_REPLY_LEFT))
            return
        if not self.owner._sleep(reply.delay):
            return
        headers = dict(reply.headers or {})
        if reply.status != 200:
            if isinstance(reply.error, Mapping):
                payload: Any = dict(reply.error)
            else:
                message = reply.error or _wire.default_error_message(reply.status)
                payload = error(reply.status, message)
            self._send_json(reply.status, payload, headers)
            return
        body = request.body
        if not body.get("stream") or reply.ignore_stream:
            build = _wire.anthropic_message if anthropic else _wire.openai_completion
            self._send_json(200, build(reply, body, serial), headers)
            return
        if reply.raw_sse is not None:
            events = _wire.raw_lines(reply.raw_sse)
        elif anthropic:
            events = _wire.anthropic_stream(reply, body, serial)
        else:
            events = _wire.openai_stream(reply, body, serial)
        self._stream(events, reply, headers)

    def _reject(self, request: RecordedRequest, *, anthropic: bool) -> tuple[int, str] | None:
        return refusal(self.owner, request, anthropic=anthropic)

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] = {}) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _stream(self, events: list[_wire.Event], reply: Reply, headers: Mapping[str, str]) -> None:
        # Chunked encoding makes a deliberate drop look like a real one to the client: the body
        # ends without its terminating chunk, which httpx reports as a protocol error.
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.flush()
            if reply.fault in ("stall", "keepalive", "empty"):
                self._idle(reply)
                return
            deltas = 0
            for i, event in enumerate(events):
                if event.is_delta:
                    if reply.break_after is not None and deltas >= reply.break_after:
                        self._reset() if reply.fault == "reset" else self._drop()
                        return
                    if deltas == reply.hold_after and not self._wait(reply.hold):
                        self._drop()
                        return
                    deltas += 1
                if i and not self.owner._sleep(reply.chunk_delay):
                    self._drop()
                    return
                self._write_chunk(event.data)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _wait(self, hold: threading.Event | None) -> bool:
        """Wait for ``hold`` (``Reply.hold``); False when the server stops first."""
        while hold is not None and not hold.wait(0.05):
            if self.owner._stopping.is_set():
                return False
        return True

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _idle(self, reply: Reply) -> None:
        """Hold the stream open without content: silence, keep-alive comments or empty chunks."""
        interval = reply.chunk_delay or 0.2
        sent = 0
        while self.owner._sleep(interval):
            if reply.fault == "keepalive":
                self._write_chunk(b": keep-alive\n\n")
            elif reply.fault == "empty":
                self._write_chunk(_EMPTY_CHUNKS[sent % len(_EMPTY_CHUNKS)])
                sent += 1
        self._drop()

    def _reset(self) -> None:
        # SO_LINGER with a zero timeout makes close() send RST instead of FIN: a peer reset.
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
