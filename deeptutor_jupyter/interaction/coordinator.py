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
from deeptutor_jupyter.interaction.owners import Owner
from deeptutor_jupyter.interaction.pending import PendingCalls
from deeptutor_jupyter.interaction.schema import AskUserArgs, AskUserResult, payload
from deeptutor_jupyter.providers.base import ToolCall
from deeptutor_jupyter.store.db import PendingRow, Store, StoreError
from deeptutor_jupyter.tools.base import ToolResult

logger = logging.getLogger(__name__)

Result = AskUserResult
Wire = dict[str, Any]  # a result as the store and the shared mechanism keep it (its JSON)


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


def _cancelled(reason: str) -> AskUserResult:
    # Made when needed: one made at import would build the model before a first request that
    # does not use it (lazy_model.py).
    return AskUserResult(cancelled=True, reason=reason)


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
    """ask_user, one kind of deferred call (interaction/pending.py): its payload, its check."""

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
        # Shared with every other kind of pause of this process (quizzes, reviews).
        self.calls = PendingCalls(store, owner=owner)
        self.calls.kinds[KIND] = AskUserKind(self)

    @property
    def owner(self) -> Owner | None:
        return self.calls.owner

    # The session's hooks live on the shared mechanism; these name them for ask_user's callers.
    @property
    def on_orphan(self) -> Callable[[PendingRow, Wire], None] | None:
        return self.calls.on_orphan

    @on_orphan.setter
    def on_orphan(self, hook: Callable[[PendingRow, Wire], None] | None) -> None:
        self.calls.on_orphan = hook

    @property
    def can_resume(self) -> Callable[[PendingRow], bool]:
        return self.calls.can_resume

    @can_resume.setter
    def can_resume(self, check: Callable[[PendingRow], bool]) -> None:
        self.calls.can_resume = check

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
        self.calls.drop_states(list(supersedes or []))
        self._write_audit(
            "asked", session_id=session_id, request_id=request_id, tool_call_id=call.id
        )

        def stopped() -> None:
            # The turn was stopped while waiting: the question must not stay answerable.
            result = _cancelled("turn_stopped")
            stopped_result = result.wire()
            if self.store.resolve_pending(request_id, "cancelled", stopped_result, time.time()):
                # The open card follows this event; without it the form stays answerable.
                emit(resolved_event(request_id, call.id, result))
                self._audit_outcome(row, "cancelled", result)

        answered = await self.calls.wait(
            row,
            self.expiry_seconds,
            shown=lambda: emit(UserInputRequired.model_validate(body)),
            on_cancel=stopped,
        )
        result = result_of(answered)
        emit(resolved_event(request_id, call.id, result))
        return tool_result_of(result)

    def is_live(self, request_id: str) -> bool:
        return self.calls.is_live(request_id)

    @property
    def waiting(self) -> bool:
        return self.calls.waiting

    def poll_remote(self) -> int:
        return self.calls.poll_remote()

    def owner_elsewhere(self, row: PendingRow) -> bool:
        return self.calls.owner_elsewhere(row)

    def answerable(self, row: PendingRow) -> bool:
        return self.calls.answerable(row)

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
        if row is None or row.kind != KIND:
            self._reject(session_id, request_id, "", "unknown")
            raise UnknownRequest(f"There is no question with id {request_id!r}.")
        row = open_row(self.calls, row, session_id, self._reject)
        if not cancelled:
            try:
                check_answer(row.payload, selections, custom_input, self.workspace)
            except InvalidAnswer:
                self._reject(session_id, request_id, row.tool_call_id, "invalid")
                raise
        route = self.calls.route(row)
        if route == "nowhere":
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
        self.calls.deliver(row, route, result.wire())
        return result

    def expire(self, request_id: str) -> bool:
        return self._close(request_id, "expired", _cancelled("timeout"))

    def cancel(self, request_id: str, reason: str) -> bool:
        """Close a question no learner will answer (its conversation was deleted): consumed
        once and audited; a turn waiting here ends, one waiting elsewhere reads it in the store.
        False when it was no longer pending."""
        return self._close(request_id, "cancelled", AskUserResult(cancelled=True, reason=reason))

    def _close(self, request_id: str, status: str, result: Result) -> bool:
        """Consume a question no learner answered (expired, cancelled) and wake its turn."""
        row = self.store.get_pending(request_id)
        if row is None or not self.store.resolve_pending(
            request_id, status, result.wire(), time.time()
        ):
            return False
        self._audit_outcome(row, status, result)
        self.calls.resolve_waiter(request_id, result.wire())
        return True

    def expire_stale(self, rows: list[PendingRow]) -> list[PendingRow]:
        """Expire what is past its time, of any kind; returns the rows that are still pending."""
        return self.calls.expire_stale(rows, time.time())

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


KIND = "ask_user"
Reject = Callable[[str, str, str, str], None]  # (session_id, request_id, tool_call_id, reason)


def open_row(
    calls: PendingCalls,
    row: PendingRow,
    session_id: str,
    reject: Reject,
    *,
    words: tuple[str, str] = ("question", "answered"),
    closed: Callable[[PendingRow], str] | None = None,
) -> PendingRow:
    """The row if it still takes an answer: the refusals every kind shares, each audited by
    ``reject``; ``words`` name the kind in them (noun, past participle)."""
    noun, done = words
    request_id = row.request_id
    if row.session_id != session_id:
        reject(session_id, request_id, row.tool_call_id, "foreign_session")
        raise ForeignSession(f"This {noun} belongs to another session; it was not {done}.")
    if row.status == "pending" and time.time() >= row.expires_at:
        calls.expire(row)
        row = calls.store.get_pending(request_id) or row
    if row.status == "expired":
        reject(session_id, request_id, row.tool_call_id, "expired")
        raise ExpiredRequest(f"This {noun} timed out before it was {done}.")
    if row.status != "pending":
        reject(session_id, request_id, row.tool_call_id, "duplicate")
        raise AlreadyAnswered((closed or closed_message)(row))
    return row


class AskUserKind:
    """ask_user as a kind of deferred call (interaction/pending.py)."""

    def __init__(self, coordinator: InteractionCoordinator) -> None:
        self.coordinator = coordinator

    def expire(self, request_id: str) -> bool:
        return self.coordinator.expire(request_id)

    def tool_result(self, result: Wire) -> ToolResult:
        return tool_result_of(result_of(result))

    def resolved_event(self, row: PendingRow, result: Wire) -> UserInputResolved:
        return resolved_event(row.request_id, row.tool_call_id, result_of(result))


def closed_message(row: PendingRow) -> str:
    """Why a question no longer takes an answer, in the words of what happened to it."""
    reason = result_of(row.result).reason if row.result else ""
    if row.status == "cancelled" and reason == "turn_stopped":
        return "This turn was stopped, so its question no longer takes an answer."
    if row.status == "cancelled":
        return "This question was cancelled, so it no longer takes an answer."
    return "This question was already answered; the answer stands."
