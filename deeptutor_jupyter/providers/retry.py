"""Retrying a streamed round, but only while retrying is invisible to the learner.

Once a delta has been shown, a retry would repeat or contradict it, so any failure after that point
becomes a ``stream_broken`` error instead. Before that point, connect errors, dropped connections,
429 and 5xx are retried with exponential backoff and jitter, honouring ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from deeptutor_jupyter.providers.base import (
    ProviderError,
    ProviderEvent,
    TextDelta,
    ThinkingDelta,
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


class RetryNow(Exception):
    """Raised by an attempt that has changed what it will send and wants to go again at once."""


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    retry_after_cap: float = 30.0
    jitter: float = 0.25

    def delay(self, failures: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``failures + 1``."""
        if retry_after is not None:
            return min(float(retry_after), self.retry_after_cap)
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
    attempt: Callable[[], AsyncIterator[ProviderEvent]],
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
            async for event in attempt():
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
            await sleep(policy.delay(failures, _retry_after(exc)))
            failures += 1
