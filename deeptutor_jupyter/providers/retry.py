"""Retrying a streamed round, but only while retrying is invisible to the learner.

Once a delta has been shown, a retry would repeat or contradict it, so any failure after that point
becomes a ``stream_broken`` error instead. Before that point, connect errors, dropped connections,
429 and 5xx are retried with exponential backoff and jitter, honouring ``Retry-After``; a wait is
announced with a ``Waiting`` event (the status line counts it down), and a ``Retry-After`` longer
than ``max_retry_wait`` ends the round at once with the provider's error.

A stream is also given up on when it sends nothing but keep-alive comments for ``idle_timeout``
seconds: the read timeout of httpx never fires then, since the comments keep bytes flowing.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.providers.base import (
    Progress,
    ProviderError,
    ProviderEvent,
    TextDelta,
    ThinkingDelta,
    Waiting,
)
from deeptutor_jupyter.providers.errors import (
    Endpoint,
    HTTPStatusFailure,
    IncompleteStream,
    course_refusal,
    from_exception,
    retry_after_seconds,
)

Sleep = Callable[[float], Awaitable[None]]

# A degradation (e.g. dropping stream_options) changes the request, so it can only happen a few
# times before every optional feature is already off; this bound is a backstop, not a budget.
_MAX_DEGRADATIONS = 4


class RetryNow(DeepTutorError):
    """Raised by an attempt that has changed what it will send and wants to go again at once."""

    code = "retry_now"


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    # A Retry-After longer than this is not waited for: the round fails at once (setting
    # ``max_retry_wait``); the learner would rather know than watch a countdown of minutes.
    max_retry_wait: float = 60.0
    jitter: float = 0.25
    # Seconds without any event (keep-alive comments do not count); None: no limit.
    idle_timeout: float | None = None

    def delay(self, failures: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``failures + 1``."""
        if retry_after is not None:
            return float(retry_after)
        base = min(self.backoff_base * 2.0**failures, self.backoff_max)
        return base * (1 + self.jitter * random.random())


def is_retryable(exc: BaseException) -> bool:
    import httpx

    if isinstance(exc, HTTPStatusFailure):
        if _final_course_refusal(exc.body):
            return False  # a spent daily budget or a refused course key stays so for a while
        return exc.status in (408, 409, 429) or exc.status >= 500
    # Read timeouts are not retried: the learner already waited a full timeout once.
    return isinstance(
        exc,
        httpx.ConnectError
        | httpx.ConnectTimeout
        | httpx.RemoteProtocolError
        | httpx.ReadError
        | IncompleteStream,
    )


def _final_course_refusal(body: str) -> bool:
    refused = course_refusal(body)
    return refused is not None and refused[0] in ("budget_exhausted", "upstream_key_rejected")


def _retry_after(exc: BaseException) -> float | None:
    if isinstance(exc, HTTPStatusFailure):
        return retry_after_seconds(exc.headers)
    return None


async def retrying_stream(
    attempt: Callable[[], AsyncIterator[ProviderEvent | Progress]],
    endpoint: Endpoint,
    policy: RetryPolicy,
    sleep: Sleep = asyncio.sleep,
) -> AsyncIterator[ProviderEvent]:
    """Run ``attempt`` until it completes, retrying failures that happen before any output."""
    import httpx

    failures = 0
    degradations = 0
    while True:
        shown = False
        try:
            async for event in _watched(attempt(), endpoint, policy.idle_timeout):
                if isinstance(event, Progress):
                    continue
                if isinstance(event, TextDelta | ThinkingDelta):
                    shown = True
                yield event
            return
        except RetryNow:
            degradations += 1
            if degradations > _MAX_DEGRADATIONS:
                raise endpoint.error(
                    "bad_request", f"{endpoint.spec.label} kept rejecting the request."
                ) from None
        except ProviderError:
            raise
        except (httpx.HTTPError, HTTPStatusFailure, IncompleteStream) as exc:
            if shown or failures >= policy.max_retries or not is_retryable(exc):
                raise from_exception(endpoint, exc, streamed=shown) from exc
            retry_after = _retry_after(exc)
            if retry_after is not None and retry_after > policy.max_retry_wait:
                raise too_long_to_wait(endpoint, exc, retry_after, policy) from exc
            wait = policy.delay(failures, retry_after)
            if retry_after is not None or wait >= 1.0:
                yield Waiting(wait, _waiting_reason(endpoint, exc), _status(exc))
            await sleep(wait)
            failures += 1


async def _watched(
    events: AsyncIterator[ProviderEvent | Progress], endpoint: Endpoint, idle: float | None
) -> AsyncIterator[ProviderEvent | Progress]:
    """``events``, failing when none arrives for ``idle`` seconds (keep-alives do not count)."""
    if idle is None:
        async for event in events:
            yield event
        return
    iterator = events.__aiter__()
    try:
        while True:
            try:
                # asyncio.timeout cancels this task's own await, so the stream's ``async with``
                # unwinds in the task that opened it (httpx/anyio require that).
                async with asyncio.timeout(idle):
                    event = await iterator.__anext__()
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise idle_timeout_error(endpoint, idle) from None
            yield event
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


def idle_timeout_error(endpoint: Endpoint, idle: float) -> ProviderError:
    return endpoint.error(
        "timeout",
        f"{endpoint.spec.label} sent nothing for {idle:g} s (only keep-alive signals, or "
        "silence), so the answer was given up on.",
        "Run the turn again; if the model is just slow, raise idle_timeout "
        "(DEEPTUTOR_IDLE_TIMEOUT or settings.toml).",
    )


def too_long_to_wait(
    endpoint: Endpoint, exc: BaseException, retry_after: float, policy: RetryPolicy
) -> ProviderError:
    error = from_exception(endpoint, exc)
    error.message += (
        f" It asked to wait {retry_after:g} s before retrying, longer than max_retry_wait "
        f"({policy.max_retry_wait:g} s), so the tutor did not wait."
    )
    error.hint = (
        f"Run the cell again in about {_human(retry_after)}, or raise max_retry_wait "
        "(DEEPTUTOR_MAX_RETRY_WAIT or settings.toml) to let the tutor wait."
    )
    return error


def _human(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"


def _status(exc: BaseException) -> int | None:
    return exc.status if isinstance(exc, HTTPStatusFailure) else None


def _waiting_reason(endpoint: Endpoint, exc: BaseException) -> str:
    label = endpoint.spec.label
    status = _status(exc)
    if status == 429:
        return f"rate limited by {label}"
    if status is not None:
        return f"{label} answered HTTP {status}"
    return f"{label} could not be reached"
