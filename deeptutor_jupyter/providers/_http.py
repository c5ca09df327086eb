"""What both wire formats share: the client, timeouts, URLs, and turning error statuses into data.

This module imports httpx at the top; the package ``__init__`` only reaches it on first use.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx

from deeptutor_jupyter.providers.base import (
    REQUEST_SENT,
    ChatRequest,
    Compat,
    Progress,
    ProviderEvent,
)
from deeptutor_jupyter.providers.errors import Endpoint, HTTPStatusFailure, malformed
from deeptutor_jupyter.providers.retry import RetryPolicy, Sleep, retrying_stream
from deeptutor_jupyter.providers.specs import ProviderSpec
from deeptutor_jupyter.redact import clean


def join_url(base_url: str, path: str, params: Mapping[str, str] | None = None) -> str:
    """Append ``path`` to the base URL's path, keeping any query the base URL already carries."""
    url = httpx.URL(base_url)
    url = url.copy_with(path=url.path.rstrip("/") + path)
    for name, value in (params or {}).items():
        if name not in url.params:
            url = url.copy_add_param(name, value)
    return str(url)


_SSL_LOCK = threading.Lock()
_SSL: dict[tuple[str, str], ssl.SSLContext] = {}
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy")


def shared_ssl_context() -> ssl.SSLContext:
    """httpx's default verifying context (certifi, or SSL_CERT_FILE / SSL_CERT_DIR), made once.

    Loading the CA bundle costs ~45 ms, which every new client paid again; the kernel makes it
    in the background after ``%load_ext`` (kernel/warm.py). One context serves every client.
    """
    key = (os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", ""))
    with _SSL_LOCK:  # the warming thread may be making it right now: wait for that one
        context = _SSL.get(key)
        if context is None:
            context = _SSL[key] = httpx.create_ssl_context()
        return context


def ssl_context_for(base_url: str) -> ssl.SSLContext:
    """The context a client for ``base_url`` needs: the shared verifying one, except for plain
    http without a proxy, which never makes a TLS connection. That one gets a context that
    trusts no certificate (an https redirect fails verification, it is never unverified)."""
    proxied = any(k.lower() in _PROXY_VARS and v for k, v in os.environ.items())
    if base_url.lower().startswith("http://") and not proxied:
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CA bundle to load: ~0.1 ms
    return shared_ssl_context()


def wire_model(spec: ProviderSpec, model: str) -> str:
    """The model name as the endpoint expects it (``openai/gpt-4o`` -> ``gpt-4o`` where safe)."""
    if spec.strip_model_prefix and "/" in model:
        return model.split("/", 1)[1]
    return model


class HTTPModel:
    """Owns the client, timeouts and retry policy; subclasses map a request to one attempt."""

    def __init__(
        self,
        spec: ProviderSpec,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        compat: Compat | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        sleep: Sleep | None = None,
        max_retry_wait: float = 60.0,
        idle_timeout: float | None = None,
        turn_deadline: float | None = None,
    ) -> None:
        if not base_url:
            raise ValueError(
                f"{spec.label} has no default base URL; pass base_url ({spec.docs_hint})."
            )
        self.spec = spec
        self.provider = spec.name
        self.model = model
        self.base_url = base_url
        self.compat = (
            compat
            if compat is not None
            else Compat(
                stream_options=spec.supports_stream_options, native_tools=spec.supports_tools
            )
        )
        self._api_key = api_key or None
        self._client = client
        self._owns_client = client is None
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._policy = RetryPolicy(
            max_retries=max_retries,
            backoff_base=backoff_base,
            max_retry_wait=max_retry_wait,
            idle_timeout=idle_timeout,
        )
        # Read by the chat loop (agent/loop.py): the most model and tool time one turn may use.
        self.turn_deadline = turn_deadline
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.provider}:{self.model} at {self.base_url}>"

    def _http(self) -> httpx.AsyncClient:
        # Created on first use, inside the loop that streams, rather than in __init__.
        if self._client is None and self.spec.name == "hub":
            from deeptutor_jupyter.providers.hub_link import hub_async_client

            # Through the service's checked socket when the hub gave one (hub_link.py).
            self._client = hub_async_client(verify=ssl_context_for(self.base_url))
        if self._client is None:
            self._client = httpx.AsyncClient(verify=ssl_context_for(self.base_url))
        return self._client

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    def endpoint(self, model: str) -> Endpoint:
        return Endpoint(self.spec, self.base_url, model, self._api_key)

    def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        model = wire_model(self.spec, request.model or self.model)
        endpoint = self.endpoint(model)
        kwargs: dict[str, Any] = {} if self._sleep is None else {"sleep": self._sleep}
        return retrying_stream(
            lambda: self._attempt(request, model, endpoint), endpoint, self._policy, **kwargs
        )

    def _attempt(
        self, request: ChatRequest, model: str, endpoint: Endpoint
    ) -> AsyncIterator[ProviderEvent | Progress]:
        raise NotImplementedError

    @asynccontextmanager
    async def _post_stream(
        self, url: str, headers: Mapping[str, str], body: dict[str, Any]
    ) -> AsyncIterator[httpx.Response]:
        """POST and yield the open response; an error status is read and raised as data.
        The body is scrubbed of the keys (redact.py): a key the learner pasted into a question
        or an answer goes to no model; the key's one place is the request's header."""
        async with self._http().stream(
            "POST",
            url,
            json=clean(body),
            headers=dict(headers),
            timeout=self._timeout,
            extensions=sent_trace(REQUEST_SENT.get()),
        ) as response:
            if response.status_code >= 400:
                await response.aread()
                raise HTTPStatusFailure(response.status_code, response.text, response.headers)
            yield response


def sent_trace(sent: Callable[[], None] | None) -> dict[str, Any] | None:
    """httpcore's ``trace`` extension calling ``sent`` once the request body is written
    (HTTP/1.1 or HTTP/2); None without ``sent``: nothing traced. A transport that does not
    trace (a test's mock) never calls it; the kernel then shows its view on the turn's next
    event (kernel/start.py)."""
    if sent is None:
        return None

    async def trace(name: str, _info: dict[str, Any]) -> None:
        if name.endswith("send_request_body.complete"):
            with contextlib.suppress(Exception):  # the view's business, never the request's
                sent()

    return {"trace": trace}


def note_once(compat: Compat, note: str) -> None:
    if note not in compat.notes:
        compat.notes.append(note)


def require_event_stream(response: httpx.Response, endpoint: Endpoint) -> None:
    """A 200 that is not an event stream is usually a proxy or login page, not the model."""
    content_type = response.headers.get("content-type", "")
    if not content_type.startswith("text/event-stream"):
        raise malformed(endpoint, f"expected an event stream, got '{content_type or 'nothing'}'")


DRAIN_SECONDS = 1.0


async def drain(events: AsyncIterator[Any]) -> None:
    """Read what a server sends after its end marker, so the connection can be reused.

    Leaving the body unread makes httpx close the connection, and the next round pays a new
    TCP (and TLS) handshake. A server that keeps the stream open past its end marker is given
    up on after a moment: the answer is already complete.
    """
    import asyncio

    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in events:
                pass
    except (TimeoutError, httpx.HTTPError):
        pass
