"""The InteractionCoordinator: ask_user is intercepted here, never executed.

``ask`` saves the question (and the paused turn) in the store, emits ``user_input_required`` and
waits on a Future of this process. ``submit`` is the one door every surface uses: it checks the
answer, consumes the pending row exactly once (an UPDATE guarded by ``status = 'pending'``, so
two kernels cannot both win), writes the audit line, and hands the result to whoever waits: the
live Future, or, after a kernel restart, the ``on_orphan`` hook that resumes the saved turn.

``submit`` may run on a subshell thread (widget callbacks do); it touches the loop only through
``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deeptutor_jupyter.agent.events import Emit, UserInputRequired, UserInputResolved
from deeptutor_jupyter.interaction.answers import (  # the answer rules live there
    InteractionError as InteractionError,
)
from deeptutor_jupyter.interaction.answers import InvalidAnswer as InvalidAnswer
from deeptutor_jupyter.interaction.answers import check_answer as check_answer
from deeptutor_jupyter.interaction.answers import check_types as check_types
from deeptutor_jupyter.interaction.audit import AuditLog
from deeptutor_jupyter.interaction.owners import Owner, live_owner_ids
from deeptutor_jupyter.interaction.schema import AskUserArgs, AskUserResult, payload
from deeptutor_jupyter.providers.base import ToolCall
from deeptutor_jupyter.store.db import PendingRow, Store, StoreError
from deeptutor_jupyter.tools.base import ToolResult

logger = logging.getLogger(__name__)

Result = AskUserResult


class UnknownRequest(InteractionError):
    code = "unknown"


class ForeignSession(InteractionError):
    code = "foreign_session"


class AlreadyAnswered(InteractionError):
    code = "duplicate"


class ExpiredRequest(InteractionError):
    code = "expired"


class NotResumable(InteractionError):
    code = "not_resumable"


class StoreUnavailable(InteractionError, StoreError):
    """The answer could not be saved (full disk, read-only home); nothing was consumed."""

    code = "store"


TIMEOUT_RESULT = AskUserResult(cancelled=True, reason="timeout")
STOPPED_RESULT = AskUserResult(cancelled=True, reason="turn_stopped")


def resolved_fields(result: Result) -> dict[str, Any]:
    """The ``user_input_resolved`` event's fields for a result (the tool result's names are the
    model's; the event's are snake_case like every event); ``reason`` only when there is one."""
    fields: dict[str, Any] = {
        "selections": list(result.selections),
        "custom_input": result.customInput,
        "cancelled": result.cancelled,
    }
    if result.reason:
        fields["reason"] = result.reason
    return fields


def resolved_event(request_id: str, tool_call_id: str, result: Result) -> UserInputResolved:
    return UserInputResolved(id=request_id, tool_call_id=tool_call_id, **resolved_fields(result))


def tool_result_of(result: Result) -> ToolResult:
    """The tool result the model reads; a cancelled question ends the turn."""
    if result.reason == "timeout":
        summary = "timed out"
    elif result.cancelled:
        summary = "cancelled"
    else:
        summary = "answered: " + (", ".join(result.selections) or "(free text)")
    wire = result.wire()
    return ToolResult(
        content=json.dumps(wire, ensure_ascii=False),
        data=wire,
        summary=summary,
        stop_turn=result.cancelled,
    )


def result_of(data: dict[str, Any]) -> Result:
    """A result read back from the store (or a tool result's data)."""
    return AskUserResult.model_validate(data)


class InteractionCoordinator:
    def __init__(
        self,
        store: Store,
        audit: AuditLog,
        *,
        workspace: Path,
        expiry_seconds: float = 24 * 3600,
        owner: Owner | None = None,
    ) -> None:
        self.store = store
        self.audit = audit
        self.workspace = workspace
        self.expiry_seconds = expiry_seconds
        # The process whose turns wait here; None for a surface that only answers (a server).
        self.owner = owner
        self._waiters: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future[Result]]] = {}
        self._seen_version = -1
        # Set by the kernel: continue a saved turn whose Future died with its kernel.
        self.on_orphan: Callable[[PendingRow, Result], None] | None = None
        self.can_resume: Callable[[PendingRow], bool] = lambda _row: False

    # asking ------------------------------------------------------------------------------
    async def ask(
        self,
        *,
        session_id: str,
        turn_id: str,
        call: ToolCall,
        args: AskUserArgs,
        emit: Emit,
        snapshot: dict[str, Any] | None,
        place: dict[str, Any] | None = None,
        supersedes: list[str] | None = None,
        on_saved: Callable[[str], None] | None = None,
    ) -> ToolResult:
        """Save the question (and the paused turn), show it, wait for the answer.

        ``supersedes`` are saved states of this turn's earlier questions: this new checkpoint
        replaces them, so they are dropped only once it is written.
        """
        now = time.time()
        request_id = f"ask_{uuid.uuid4().hex[:16]}"
        expires_at = now + self.expiry_seconds
        body = payload(
            args,
            request_id=request_id,
            tool_call_id=call.id,
            session_id=session_id,
            expires_at=expires_at,
        )
        owner = self.owner.id if self.owner is not None else None
        row = PendingRow(
            request_id,
            session_id,
            turn_id,
            call.id,
            body,
            "pending",
            now,
            expires_at,
            None,
            None,
            owner,
            place,
        )
        self.store.add_pending(row, snapshot)
        if on_saved is not None and snapshot is not None:
            on_saved(request_id)
        if supersedes:
            try:
                self.store.drop_turn_state(*supersedes)
            except Exception:  # kept states are tidied at the turn's end or by housekeeping
                logger.warning("could not drop superseded turn states", exc_info=True)
        self._write_audit(
            "asked", session_id=session_id, request_id=request_id, tool_call_id=call.id
        )
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Result] = loop.create_future()
        self._waiters[request_id] = (loop, future)
        timer = loop.call_later(self.expiry_seconds, self.expire, request_id)
        emit(UserInputRequired.model_validate(body))
        try:
            result = await future
        except asyncio.CancelledError:
            # The turn was stopped while waiting: the question must not stay answerable.
            stopped = STOPPED_RESULT.wire()
            if self.store.resolve_pending(request_id, "cancelled", stopped, time.time()):
                # The open card follows this event; without it the form stays answerable.
                emit(resolved_event(request_id, call.id, STOPPED_RESULT))
                self._audit_outcome(row, "cancelled", STOPPED_RESULT)
            raise
        finally:
            timer.cancel()
            self._waiters.pop(request_id, None)
        emit(resolved_event(request_id, call.id, result))
        return tool_result_of(result)

    def is_live(self, request_id: str) -> bool:
        return request_id in self._waiters

    @property
    def waiting(self) -> bool:
        return bool(self._waiters)

    def poll_remote(self) -> int:
        """Deliver answers that another process consumed for questions waiting here.

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
            if state.status != "pending" and state.result is not None and waiter is not None:
                _resolve_soon(waiter, result_of(state.result))
                resolved += 1
        return resolved

    def owner_elsewhere(self, row: PendingRow) -> bool:
        """True when another live process waits on this question and will continue its turn."""
        if row.owner is None or row.request_id in self._waiters:
            return False
        if self.owner is not None and row.owner == self.owner.id:
            return False  # ours, but its waiter is gone (the turn was stopped meanwhile)
        return row.owner in live_owner_ids(self.store)

    def answerable(self, row: PendingRow) -> bool:
        """Whether an answer given here would reach a turn (live here, live elsewhere, or
        resumable from its saved state)."""
        return self.is_live(row.request_id) or self.owner_elsewhere(row) or self.can_resume(row)

    # answering ---------------------------------------------------------------------------
    def submit(
        self,
        session_id: str,
        request_id: str,
        selections: list[str] | None = None,
        custom_input: str = "",
        cancelled: bool = False,
    ) -> Result:
        check_types(selections, custom_input, cancelled)
        selections = list(selections or [])
        row = self.store.get_pending(request_id)
        if row is None:
            self._reject(session_id, request_id, "", "unknown")
            raise UnknownRequest(f"There is no question with id {request_id!r}.")
        if row.session_id != session_id:
            self._reject(session_id, request_id, row.tool_call_id, "foreign_session")
            raise ForeignSession("This question belongs to another session; it was not answered.")
        if row.status == "pending" and time.time() >= row.expires_at:
            self.expire(request_id)
            row = self.store.get_pending(request_id) or row
        if row.status == "expired":
            self._reject(session_id, request_id, row.tool_call_id, "expired")
            raise ExpiredRequest("This question timed out before it was answered.")
        if row.status != "pending":
            self._reject(session_id, request_id, row.tool_call_id, "duplicate")
            raise AlreadyAnswered(closed_message(row))
        if not cancelled:
            try:
                check_answer(row.payload, selections, custom_input, self.workspace)
            except InvalidAnswer:
                self._reject(session_id, request_id, row.tool_call_id, "invalid")
                raise
        # Decided once: a waiter that vanishes before delivery (the turn was stopped on the loop
        # thread meanwhile) must not turn this answer into a restart resume of that turn.
        waiter = self._waiters.get(request_id)
        elsewhere = waiter is None and self.owner_elsewhere(row)
        if waiter is None and not elsewhere and not self.can_resume(row):
            self._reject(session_id, request_id, row.tool_call_id, "not_resumable")
            raise NotResumable(
                "The kernel restarted; this question can no longer continue. Start the task again."
            )
        result = AskUserResult(
            selections=[] if cancelled else selections,
            customInput="" if cancelled else custom_input,
            cancelled=cancelled,
        )
        status = "cancelled" if cancelled else "answered"
        if not self.store.resolve_pending(request_id, status, result.wire(), time.time()):
            self._reject(session_id, request_id, row.tool_call_id, "duplicate")
            raise AlreadyAnswered(closed_message(self.store.get_pending(request_id) or row))
        self._audit_outcome(row, status, result)
        if waiter is not None:
            _resolve_soon(waiter, result)  # a no-op if the turn was stopped meanwhile
        elif elsewhere:
            pass  # its owner notices the answer in the store and continues in its own cell
        elif self.on_orphan is not None:
            self.on_orphan(row, result)
        return result

    def expire(self, request_id: str) -> bool:
        row = self.store.get_pending(request_id)
        if row is None or not self.store.resolve_pending(
            request_id, "expired", TIMEOUT_RESULT.wire(), time.time()
        ):
            return False
        self._audit_outcome(row, "expired", TIMEOUT_RESULT)
        waiter = self._waiters.get(request_id)
        if waiter is not None:
            _resolve_soon(waiter, TIMEOUT_RESULT)
        return True

    def expire_stale(self, rows: list[PendingRow]) -> list[PendingRow]:
        """Expire what is past its time; returns the rows that are still pending."""
        now = time.time()
        return [r for r in rows if not (r.expires_at <= now and self.expire(r.request_id))]

    def _write_audit(self, event: Any, **fields: Any) -> None:
        """An audit line that cannot be written (full disk) is logged, never fatal: the answer
        was consumed already and must still reach the turn."""
        try:
            self.audit.write(event, **fields)
        except OSError:
            logger.warning("could not write the ask_user audit log", exc_info=True)

    def _audit_outcome(self, row: PendingRow, event: Any, result: Result) -> None:
        self._write_audit(
            event,
            session_id=row.session_id,
            request_id=row.request_id,
            tool_call_id=row.tool_call_id,
            asked_at=row.created_at,
            selections=list(result.selections),
            custom_input=result.customInput,
            reason=result.reason,
        )

    def _reject(self, session_id: str, request_id: str, tool_call_id: str, reason: str) -> None:
        self._write_audit(
            "rejected",
            session_id=session_id,
            request_id=request_id,
            tool_call_id=tool_call_id,
            reason=reason,
        )


def _resolve_soon(
    waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[Result]], result: Result
) -> None:
    loop, future = waiter

    def resolve() -> None:
        if not future.done():
            future.set_result(result)

    loop.call_soon_threadsafe(resolve)


def closed_message(row: PendingRow) -> str:
    """Why a question no longer takes an answer, in the words of what happened to it."""
    reason = result_of(row.result).reason if row.result else ""
    if row.status == "cancelled" and reason == "turn_stopped":
        return "This turn was stopped, so its question no longer takes an answer."
    if row.status == "cancelled":
        return "This question was cancelled, so it no longer takes an answer."
    return "This question was already answered; the answer stands."
