"""Scores on their way to the LMS gradebook: queued in the database, retried until delivered.

A score is a row of ``deeptutor_lti_score`` (hub/lti/store.py) from the moment the service
accepts it. The service's delivery loop posts due rows to the line item's ``/scores``
(AGS 2.0: ``userId``, ``scoreGiven``, ``scoreMaximum``, ``activityProgress``,
``gradingProgress``, ``timestamp``). A failure (the LMS down, a 500, a refused token) keeps the
row with the attempt count, the error (never a token) and the next try, after a backoff that
doubles from ``FIRST_DELAY`` up to ``MAX_DELAY``; the instructor's page lists such rows. A
restarted service finds the rows where they were. Each row is claimed before it is posted
(``LTIStore.claim``), so two replicas never post the same row.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging

from deeptutor_jupyter.hub.lti.services import LMSClient, LMSError
from deeptutor_jupyter.hub.lti.store import LTIStore, ScoreRow
from deeptutor_jupyter.hub.quota import utc_now

log = logging.getLogger("deeptutor.hub")
FIRST_DELAY = 10  # seconds before the first retry
MAX_DELAY = 3600
CLAIM_SECONDS = 60  # a claimed row that was neither delivered nor failed is tried again then
IDLE_SECONDS = 30  # how often the loop looks for due rows when nothing kicks it


def backoff(attempts: int) -> int:
    """Seconds to wait after the ``attempts``-th failure: 10, 20, 40, ... at most an hour."""
    return int(min(MAX_DELAY, FIRST_DELAY * 2 ** max(0, attempts - 1)))


def score_body(row: ScoreRow) -> dict[str, object]:
    return {
        "userId": row.lti_user,
        "scoreGiven": row.score_given,
        "scoreMaximum": row.score_maximum,
        "activityProgress": row.activity,
        "gradingProgress": row.grading,
        "timestamp": row.timestamp,
    }


async def deliver_due(
    store: LTIStore, client: LMSClient, now: dt.datetime | None = None
) -> tuple[int, int]:
    """Post every due score once; (delivered, failed)."""
    now = now or utc_now()
    stamp = int(now.timestamp())
    delivered = failed = 0
    loop = asyncio.get_running_loop()
    for row in await loop.run_in_executor(None, store.due, now):
        if not await loop.run_in_executor(None, store.claim, row, stamp + CLAIM_SECONDS):
            continue
        try:
            await client.post_score(row.lineitem, score_body(row))
        except LMSError as exc:
            wait = backoff(row.attempts + 1)
            await loop.run_in_executor(None, store.failed, row.id, str(exc), stamp + wait)
            log.warning("score %d not delivered (%s); next try in %d s", row.id, exc, wait)
            failed += 1
            continue
        await loop.run_in_executor(None, store.delivered, row.id)
        delivered += 1
    return delivered, failed


class Outbox:
    """The delivery loop of one service process; ``kick()`` after queueing a score."""

    def __init__(self, store: LTIStore, client: LMSClient) -> None:
        self.store = store
        self.client = client
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run the loop on the running event loop; the task is kept so it is not collected."""
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self.run())

    def kick(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            try:
                await deliver_due(self.store, self.client)
            except Exception as exc:  # a database hiccup must not end the deliveries
                log.warning("score delivery failed: %s", type(exc).__name__)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), IDLE_SECONDS)
            self._wake.clear()
