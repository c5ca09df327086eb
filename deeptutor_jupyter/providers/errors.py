"""Turn transport failures and provider error bodies into errors a learner can act on.

Every message names the provider and the URL the learner configured, quotes the provider's own
explanation when there is one, and carries a hint that says which setting to change. The API key is
scrubbed from everything that ends up in an error, even though providers should never echo it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.providers.base import ErrorKind, ProviderError
from deeptutor_jupyter.providers.specs import ProviderSpec

if TYPE_CHECKING:
    pass

_MAX_QUOTE = 500


class HTTPStatusFailure(DeepTutorError):
    """An error status (or an error event inside a stream) whose body has been read."""

    code = "http_status"

    def __init__(self, status: int, body: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body
        self.headers = dict(headers or {})


class IncompleteStream(DeepTutorError):
    """The stream ended cleanly at the socket level but without the protocol's final event."""

    code = "incomplete_stream"


@dataclass(frozen=True)
class Endpoint:
    """Who was being asked: everything an error message needs. ``api_key`` never appears in repr."""

    spec: ProviderSpec
    url: str
    model: str
    api_key: str | None = field(default=None, repr=False)

    def scrub(self, text: str) -> str:
        if self.api_key and len(self.api_key) >= 4:
            text = text.replace(self.api_key, "***")
        return text

    def error(
        self, kind: ErrorKind, message: str, hint: str = "", status: int | None = None
    ) -> ProviderError:
        return ProviderError(
            kind,
            self.scrub(message),
            hint=self.scrub(hint),
            status=status,
            provider=self.spec.name,
            url=self.scrub(self.url),
            model=self.model,
        )


def provider_message(body: str) -> str:
    """The human-readable part of an error body, whatever shape the provider chose."""
    text = body.strip()
    try:
        data: Any = json.loads(text)
    except ValueError:
        return text[:_MAX_QUOTE]
    for _ in range(3):
        if isinstance(data, list) and data:
            data = data[0]
        if not isinstance(data, dict):
            break
        inner = data.get("error", data.get("message", data.get("detail")))
        if isinstance(inner, str):
            return inner[:_MAX_QUOTE]
        if inner is None:
            break
        data = inner
    return text[:_MAX_QUOTE]


# Patterns, compiled (and cached by ``re``) at the first error body they read, not at import:
# a Run All's first request waits for this module (issue 28).
_STREAM_OPTIONS = r"stream_options|include_usage"
_TOOLS = (
    r"(does not|doesn't|do not|don't|not) support (the )?"
    r"(tools?|functions?|tool[ _]?(use|calls?|calling)|function[ _]?call(s|ing)?)"
    r"|support tool use"
    r"|\b(tools?|tool_choice|functions?|function[ _]?calling|tool[ _]?calling)\b"
    r"[^.]{0,40}\b(not supported|unsupported|not allowed|not enabled|not available)"
    r"|--jinja|enable-auto-tool-choice"
)


def is_stream_options_rejection(status: int, body: str) -> bool:
    return status in (400, 422) and bool(re.search(_STREAM_OPTIONS, body, re.IGNORECASE))


def is_tools_rejection(status: int, body: str) -> bool:
    # OpenRouter answers 404 ("No endpoints found that support tool use") and llama.cpp without
    # --jinja answers 500, so the status alone cannot decide.
    return status in (400, 404, 422, 500, 501) and bool(re.search(_TOOLS, body, re.IGNORECASE))


def _said(endpoint: Endpoint, quoted: str) -> str:
    return f" {endpoint.spec.label} said: {quoted}" if quoted else ""


def _key_hint(spec: ProviderSpec) -> str:
    where = " or ".join(spec.key_envs) if spec.key_envs else "the API key"
    return (
        f"Set {where} to a valid key; `%tutor config` shows which key is in use. {spec.docs_hint}."
    )


def _connection_hint(endpoint: Endpoint) -> str:
    spec = endpoint.spec
    if spec.is_local:
        return f"Start the {spec.label} server: {spec.docs_hint}. `%tutor config` shows the URL."
    return "Check the base URL (`%tutor config` shows it) and your network connection."


def course_refusal(body: str) -> tuple[str, str] | None:
    """(code, message) when a course's hub service refused the request itself (hub/gateway.py).

    Its words are already for the student ("You have used today's tutor budget; ..."), so they
    are shown as they are instead of being framed as a provider's complaint.
    """
    try:
        data: Any = json.loads(body)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict) or error.get("type") != "course_service":
        return None
    message = error.get("message")
    return (str(error.get("code", "")), str(message)[:_MAX_QUOTE]) if message else None


_COURSE_KINDS: dict[int, ErrorKind] = {
    401: "auth",
    403: "auth",
    404: "not_found",
    429: "rate_limit",
}


def from_status(endpoint: Endpoint, status: int, body: str) -> ProviderError:
    label = endpoint.spec.label
    refused = course_refusal(body)
    if refused is not None:
        kind = _COURSE_KINDS.get(status, "server" if status >= 500 else "bad_request")
        return endpoint.error(kind, refused[1], status=status)
    said = _said(endpoint, provider_message(body))
    if status in (401, 403):
        return endpoint.error(
            "auth", f"The API key was rejected by {label}.{said}", _key_hint(endpoint.spec), status
        )
    if status == 404:
        hint = "Check the model name and the base URL; `%tutor config` shows both."
        if endpoint.spec.is_local:
            hint += f" For {label}: {endpoint.spec.docs_hint}."
        message = f"Model '{endpoint.model}' was not found at {endpoint.url}.{said}"
        return endpoint.error("not_found", message, hint, status)
    if status == 408:
        message = f"{label} timed out while handling the request.{said}"
        return endpoint.error("timeout", message, "Try again in a moment.", status)
    if status == 429:
        hint = "Wait a little and try again; if it persists, check your plan's limits and credit."
        message = f"{label} is limiting how many requests you can make (HTTP 429).{said}"
        return endpoint.error("rate_limit", message, hint, status)
    if status >= 500:
        hint = "The problem is on the provider's side; try again in a moment."
        message = f"{label} had an internal error (HTTP {status}).{said}"
        return endpoint.error("server", message, hint, status)
    hint = "The provider's message says what it objected to; `%tutor config` shows the settings."
    message = f"{label} did not accept the request (HTTP {status}).{said}"
    return endpoint.error("bad_request", message, hint, status)


def broken_stream(endpoint: Endpoint, detail: str = "") -> ProviderError:
    suffix = f" ({detail})" if detail else ""
    return endpoint.error(
        "stream_broken",
        f"The connection to {endpoint.spec.label} dropped while the answer was streaming.{suffix}",
        "Run the turn again; if it keeps happening, check your network or the server's logs.",
    )


def from_exception(
    endpoint: Endpoint, exc: BaseException, *, streamed: bool = False
) -> ProviderError:
    """Classify a failure; ``streamed`` means output already reached the learner."""
    import httpx

    if isinstance(exc, ProviderError):
        return exc
    if streamed:
        return broken_stream(endpoint, _exception_detail(exc))
    if isinstance(exc, HTTPStatusFailure):
        return from_status(endpoint, exc.status, exc.body)
    if isinstance(exc, IncompleteStream | httpx.RemoteProtocolError | httpx.ReadError):
        return broken_stream(endpoint, _exception_detail(exc))
    if isinstance(exc, httpx.ConnectTimeout):
        return endpoint.error(
            "timeout",
            f"Could not connect to {endpoint.url} in time.",
            _connection_hint(endpoint),
        )
    if isinstance(exc, httpx.TimeoutException):
        return endpoint.error(
            "timeout",
            f"{endpoint.spec.label} did not answer in time.",
            "Try again, or raise the timeout (DEEPTUTOR_TIMEOUT); local models can be slow.",
        )
    if isinstance(exc, httpx.ConnectError | httpx.UnsupportedProtocol):
        return endpoint.error(
            "connection", f"No server is answering at {endpoint.url}.", _connection_hint(endpoint)
        )
    if isinstance(exc, httpx.HTTPError):
        return endpoint.error(
            "connection",
            f"Talking to {endpoint.spec.label} at {endpoint.url} failed: {_exception_detail(exc)}",
            _connection_hint(endpoint),
        )
    return endpoint.error("malformed", f"{endpoint.spec.label}: {_exception_detail(exc)}")


def malformed(endpoint: Endpoint, what: str) -> ProviderError:
    return endpoint.error(
        "malformed",
        f"{endpoint.spec.label} sent a reply that does not follow its protocol: {what}",
        "The server may not be fully compatible; `%tutor config` shows which provider is in use.",
    )


def _exception_detail(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def status_from_stream_error(error: Any, default: int = 500) -> int:
    """The HTTP status an error event inside a stream stands for, so it is retried like one."""
    if not isinstance(error, dict):
        return default
    code = error.get("code", error.get("status"))
    if isinstance(code, int) and 400 <= code < 600:
        return code
    kind = str(error.get("type", ""))
    return {
        "overloaded_error": 529,
        "rate_limit_error": 429,
        "authentication_error": 401,
        "permission_error": 403,
        "not_found_error": 404,
        "invalid_request_error": 400,
    }.get(kind, default)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    lowered = {k.lower(): v for k, v in headers.items()}
    value = lowered.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return _http_date_delay(value)


def _http_date_delay(value: str) -> float | None:
    from datetime import UTC, datetime
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
