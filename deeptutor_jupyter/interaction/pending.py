"""One mechanism for every pause: a deferred call, keyed by its tool call, resumed through one door.

``ask_user``, ``make_quiz`` and ``%tutor review`` are kinds of one pending interaction (a row of
the ``pending`` table, store/db.py). What they share lives here, once: the Futures of the turns
waiting in this process, the expiry timer, the owner rule (a live owner elsewhere continues its
own turn; an answer given here is only consumed in SQLite), the poll that delivers answers other
processes consumed, and the ``on_orphan`` hook that resumes a turn whose owner is gone
(``TutorSession.resume``). A kind adds only its payload, its check or grader, and a ``Kind``:
how it expires and what its result looks like to the model.

Everything here may be called from a subshell thread except ``wait``; the loop is touched only
through ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from deeptutor_jupyter.interaction.owners import Owner, live_owner_ids
from deeptutor_jupyter.store.db import PendingRow, Store
from deeptutor_jupyter.tools.base import ToolResult

if TYPE_CHECKING:
    from deeptutor_jupyter.agent.events import TurnEvent

logger = logging.getLogger(__name__)

Result = dict[str, Any]
Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Result]"]
# Where the turn of an answered call goes on: here (its Future waits in this process), in its
# owner's cell elsewhere, resumed here from its saved state, or nowhere.
Route = Literal["here", "elsewhere", "resume", "nowhere"]
CLOSED = ("answered", "cancelled", "expired")  # a row with its final result


class Kind(Protocol):
    """What a kind of pause adds besides its payload and its check or grader."""

    def expire(self, request_id: str) -> bool:
        """Close it as timed out (consumed once, audited); False when it was not open."""
        ...

    def tool_result(self, result: Result) -> ToolResult:
        """The tool result the model reads for this kind's stored result."""
        ...

    def resolved_event(self, row: PendingRow, result: Result) -> TurnEvent:
        """The event a resumed turn emits first, as the live turn would have."""
        ...


class PendingCalls:
    """The deferred calls of one process, over the learner's store."""

    def __init__(self, store: Store, *, owner: Owner | None = None) -> None:
        self.store = store
        # The process whose turns wait here; None for a surface that only answers (a server).
        self.owner = owner
        self.kinds: dict[str, Kind] = {}
        self._waiters: dict[str, Waiter] = {}
        self._seen_version = -1
        # Set by the session: continue a saved turn whose owner is gone, with its result.
        self.on_orphan: Callable[[PendingRow, Result], None] | None = None
        self.can_resume: Callable[[PendingRow], bool] = lambda _row: False

    # waiting -----------------------------------------------------------------------------
    async def wait(
        self,
        row: PendingRow,
        expiry_seconds: float,
        *,
        shown: Callable[[], object],
        on_cancel: Callable[[], None],
    ) -> Result:
        """Wait here for the result of a call saved in ``row``; it expires after
        ``expiry_seconds``. ``shown`` emits the form once the waiter exists (an answer may
        come back at once); a stopped turn calls ``on_cancel`` (the call must not stay
        answerable) and re-raises."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Result] = loop.create_future()
        self._waiters[row.request_id] = (loop, future)
        timer = loop.call_later(expiry_seconds, self.expire, row)
        try:
            shown()
            return await future
        except asyncio.CancelledError:
            on_cancel()
            raise
        finally:
            timer.cancel()
            self._waiters.pop(row.request_id, None)

    def expire(self, row: PendingRow) -> bool:
        kind = self.kinds.get(row.kind)
        return kind is not None and kind.expire(row.request_id)

    def expire_stale(self, rows: list[PendingRow], now: float) -> list[PendingRow]:
        """Expire what is past its time; returns the rows that are still pending."""
        return [r for r in rows if not (r.expires_at <= now and self.expire(r))]

    def is_live(self, request_id: str) -> bool:
        return request_id in self._waiters

    @property
    def waiting(self) -> bool:
        return bool(self._waiters)

    # the owner rule ----------------------------------------------------------------------
    def owner_elsewhere(self, row: PendingRow) -> bool:
        """True when another live process waits on this call and will continue its turn."""
        if row.owner is None or row.request_id in self._waiters:
            return False
        if self.owner is not None and row.owner == self.owner.id:
            return False  # ours, but its waiter is gone (the turn was stopped meanwhile)
        return row.owner in live_owner_ids(self.store)

    def answerable(self, row: PendingRow) -> bool:
        """Whether an answer given here would reach a turn (live here, live elsewhere, or
        resumable from its saved state)."""
        return self.route(row) != "nowhere"

    def route(self, row: PendingRow) -> Route:
        """Decided once, before consuming: a waiter that vanishes before delivery (the turn was
        stopped on the loop thread meanwhile) must not turn the answer into a resume."""
        if row.request_id in self._waiters:
            return "here"
        if self.owner_elsewhere(row):
            return "elsewhere"
        return "resume" if self.can_resume(row) else "nowhere"

    # delivering --------------------------------------------------------------------------
    def deliver(self, row: PendingRow, route: Route, result: Result) -> None:
        """Hand a consumed call's result to its turn, by the route decided before consuming."""
        if route == "here":
            waiter = self._waiters.get(row.request_id)
            if waiter is not None:
                resolve_soon(waiter, result)  # a no-op if the turn was stopped meanwhile
        elif route == "resume" and self.on_orphan is not None:
            self.on_orphan(row, result)
        # "elsewhere": its owner notices the result in the store and goes on in its own cell

    def resolve_waiter(self, request_id: str, result: Result) -> None:
        """Wake the turn waiting here on this call, if any (expiry, cancel)."""
        waiter = self._waiters.get(request_id)
        if waiter is not None:
            resolve_soon(waiter, result)

    def poll_remote(self) -> int:
        """Deliver results that another process consumed for calls waiting here.

        Cheap when nothing happened: ``PRAGMA data_version`` changes only when another
        connection committed. Returns how many waiters were resolved.
        """
        if not self._waiters:
            return 0
        version = self.store.data_version()
        if version == self._seen_version:
            return 0
        self._seen_version = version
        resolved = 0
        for request_id, state in self.store.question_states(list(self._waiters)).items():
            waiter = self._waiters.get(request_id)
            # Not while "grading": the row may still carry the answer of a crashed resume; the
            # grader elsewhere writes the new result when it is done.
            if state.status in CLOSED and waiter is not None and state.result is not None:
                resolve_soon(waiter, dict(state.result))
                resolved += 1
        return resolved

    def tool_result(self, row: PendingRow, result: Result) -> ToolResult:
        return self.kinds[row.kind].tool_result(result)

    def resolved_event(self, row: PendingRow, result: Result) -> TurnEvent:
        return self.kinds[row.kind].resolved_event(row, result)

    def drop_states(self, request_ids: list[str]) -> None:
        """Saved turns a newer checkpoint replaced, dropped once it is written."""
        if not request_ids:
            return
        try:
            self.store.drop_turn_state(*request_ids)
        except Exception:  # kept states are tidied at the turn's end or by housekeeping
            logger.warning("could not drop superseded turn states", exc_info=True)


def resolve_soon(waiter: Waiter, result: Result) -> None:
    loop, future = waiter

    def resolve() -> None:
        if not future.done():
            future.set_result(result)

    loop.call_soon_threadsafe(resolve)
