"""How a student's kernel reaches the course service without handing its token to an impostor.

On a one-machine hub (TLJH, LocalProcessSpawner, SystemdSpawner) the service's loopback port is
free while the service restarts, and any student's process may bind it. So the hub gives
kernels a Unix socket instead (``DEEPTUTOR_HUB_SERVICE_SOCKET``) in a folder only the service's
user may create files in, and the uid the service runs as (``DEEPTUTOR_HUB_SERVICE_UID``). Every
request of the kernel and the ``course`` CLI then goes to that socket, never to a port, and
each new connection is checked (``SO_PEERCRED``) to be held by that uid before a byte, and so
the token, is sent. Without the variables (Docker, Kubernetes: the port lives in the hub's own
network namespace) the service URL is used as is. See docs/hub.md.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Mapping
from typing import Any

import httpcore
import httpx

from deeptutor_jupyter.errors import DeepTutorError

SOCKET_ENV = "DEEPTUTOR_HUB_SERVICE_SOCKET"
UID_ENV = "DEEPTUTOR_HUB_SERVICE_UID"


class NotTheService(DeepTutorError, httpx.TransportError):
    """The socket is held by another user: nothing was sent. Not retried (providers/retry.py).
    An httpx transport error too, so every client of the service fails on it as on a refused
    connection."""

    code = "not_the_service"


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket (Linux)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def check_peer(sock: socket.socket, path: str, uid: int) -> None:
    holder = peer_uid(sock)
    if holder != uid:
        raise NotTheService(
            f"the course service's socket {path} is held by uid {holder}, not the service "
            f"(uid {uid}); nothing was sent to it. Tell your instructor."
        )


def _socket_of(stream: Any) -> socket.socket:
    sock = stream.get_extra_info("socket")
    if not isinstance(sock, socket.socket):  # anyio gives the raw socket; a stub may not
        raise NotTheService("the course service's socket could not be checked; nothing was sent")
    return sock


def _no_tcp(*_: Any, **__: Any) -> Any:
    raise NotTheService("the course service is reached through its socket only")


class _CheckedBackend(httpcore.NetworkBackend):
    def __init__(self, uid: int) -> None:
        self.uid, self.inner = uid, httpcore.SyncBackend()

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        stream = self.inner.connect_unix_socket(path, timeout, socket_options)
        try:
            check_peer(_socket_of(stream), path, self.uid)
        except NotTheService:
            stream.close()
            raise
        return stream

    connect_tcp = _no_tcp

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class _AsyncCheckedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, uid: int) -> None:
        self.uid, self.inner = uid, httpcore.AnyIOBackend()

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        stream = await self.inner.connect_unix_socket(path, timeout, socket_options)
        try:
            check_peer(_socket_of(stream), path, self.uid)
        except NotTheService:
            await stream.aclose()
            raise
        return stream

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return _no_tcp()  # type: ignore[no-any-return]

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def service_socket(environ: Mapping[str, str] | None = None) -> tuple[str, int] | None:
    """The socket and the service's uid the hub announced, or None (reach the URL directly).

    A socket without a uid is refused rather than used unchecked."""
    env = os.environ if environ is None else environ
    path = env.get(SOCKET_ENV, "").strip()
    if not path:
        return None
    raw = env.get(UID_ENV, "").strip()
    if not raw.isdigit():
        raise NotTheService(f"{SOCKET_ENV} is set without {UID_ENV}; nothing was sent")
    return path, int(raw)


def hub_client(environ: Mapping[str, str] | None = None, **kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` for the course service: through its checked socket when there is one.

    ``trust_env`` is off then, so no proxy variable reroutes the token past the socket."""
    parts = (httpx.HTTPTransport, httpcore.ConnectionPool, _CheckedBackend)
    client: httpx.Client = _client(httpx.Client, parts, environ, kwargs)
    return client


def hub_async_client(environ: Mapping[str, str] | None = None, **kwargs: Any) -> httpx.AsyncClient:
    """The asyncio twin of ``hub_client`` (the model's stream, providers/_http.py)."""
    parts = (httpx.AsyncHTTPTransport, httpcore.AsyncConnectionPool, _AsyncCheckedBackend)
    client: httpx.AsyncClient = _client(httpx.AsyncClient, parts, environ, kwargs)
    return client


def _client(
    kind: Any, parts: tuple[Any, Any, Any], environ: Mapping[str, str] | None, kwargs: Any
) -> Any:
    where = service_socket(environ)
    if where is None:
        return kind(**kwargs)
    transport_kind, pool_kind, backend_kind = parts
    transport = transport_kind(uds=where[0], trust_env=False)
    # httpx takes no network backend: its pool is replaced by one whose connections are checked.
    transport._pool = pool_kind(uds=where[0], network_backend=backend_kind(where[1]))
    return kind(transport=transport, trust_env=False, **kwargs)
