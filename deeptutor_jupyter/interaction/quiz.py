"""``make_quiz``: intercepted like ``ask_user``, graded by code, the grade is the tool result.

A quiz is a kind of deferred call (interaction/pending.py), like ``ask_user``: listed in the
one ``pending`` table with its public view, owned by the kernel whose turn waits on it, consumed
once, and continued in its owner's cell or, when the owner is gone, resumed through
``TutorSession.resume``. ``QuizCoordinator.ask`` saves the quiz (answers included, in the
learner's store only), emits ``quiz_required`` with the public view (no answers), and waits.
``submit`` is the one door a form uses, from any process: it checks the answers are readable,
holds the pending row once (``grading``), grades it from the stored quiz (choice and numeric
by code, code in the sandbox, short answers by the model in a small separate request), records
mastery evidence and review cards, writes an audit line without free text, and hands the grade
to the turn by the owner rule; the waiting tool call returns the graded result.

A ``review`` quiz (``%tutor review``) has no tool call: its grades reschedule existing cards.
Grading runs on the loop of the process that submits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, cast

from pydantic import BaseModel

from deeptutor_jupyter.agent.events import (
    Emit,
    QuizRequired,
    QuizResolved,
    ToolCallStarted,
    TurnEvent,
)
from deeptutor_jupyter.interaction.audit import AuditLog
from deeptutor_jupyter.interaction.coordinator import (
    AlreadyAnswered,
    ExpiredRequest,
    ForeignSession,
    InteractionError,
    InvalidAnswer,
    UnknownRequest,
    open_row,
)
from deeptutor_jupyter.interaction.pending import PendingCalls
from deeptutor_jupyter.interaction.quiz_record import record_grades
from deeptutor_jupyter.learning.quiz import (
    ChoiceQuestion,
    CodeQuestion,
    MakeQuizArgs,
    NumericQuestion,
    QuestionResult,
    QuizAnswerError,
    QuizOutcome,
    ShortQuestion,
    check_answers,
    empty_answer,
    grade_choice,
    grade_numeric,
    is_blank,
    not_answered,
    public_view,
)
from deeptutor_jupyter.learning.short_answer import Complete, grade_short
from deeptutor_jupyter.messages import Message
from deeptutor_jupyter.providers.base import ChatModel, ChatRequest, TextDelta, ToolCall
from deeptutor_jupyter.store.db import PendingRow
from deeptutor_jupyter.store.learning import LearningStore, QuizRow
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult

logger = logging.getLogger(__name__)

Result = dict[str, Any]  # a stored result, as interaction/pending.py hands it on
# Closed outcomes are made when needed: one made here would build the model at import, before
# a first request that does not use it (lazy_model.py).
CANCELLED = "turn_stopped"
EXPIRED = "timeout"


# A quiz is refused for the same reasons as a question, with the same codes and root.
QuizError = InteractionError
UnknownQuiz = UnknownRequest
ForeignQuiz = ForeignSession
QuizClosed = AlreadyAnswered
QuizExpired = ExpiredRequest


InvalidQuizAnswer = InvalidAnswer


class MakeQuizTool(Tool[MakeQuizArgs]):
    """Never executed where a form can be shown: the quiz coordinator intercepts it first."""

    name: ClassVar[str] = "make_quiz"
    description: ClassVar[str] = (
        "Check the learner's understanding with a short quiz shown as a form in the notebook "
        "and graded by code: kinds choice (options, answer = list of correct option ids), "
        "numeric (answer, tolerance, unit), short (reference, rubric; graded by you), code "
        "(starter, tests = Python asserts run in a sandbox). Set objective to the id of the "
        "objective being checked. You receive "
        '{"score": 0..1, "results": [{"id", "correct", "given", "feedback"}]}; the correct '
        "answers are never shown to the learner before they submit. Mastery and review "
        "scheduling come only from these grades."
    )
    Args: ClassVar[type[BaseModel]] = MakeQuizArgs

    @classmethod
    def schema(cls) -> dict[str, Any]:
        schema = super().schema()
        _drop_key(schema, "discriminator")  # its mapping points at $defs that were inlined
        return schema

    async def run(self, args: MakeQuizArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult(
            content="make_quiz needs the notebook's interactive form, and no widget frontend "
            "is available here. Ask the questions in plain text instead.",
            is_error=True,
            summary="no form available here",
        )


def _drop_key(node: Any, key: str) -> None:
    if isinstance(node, dict):
        node.pop(key, None)
        for value in node.values():
            _drop_key(value, key)
    elif isinstance(node, list):
        for item in node:
            _drop_key(item, key)


def without_quiz_answers(emit: Emit) -> Emit:
    """Wrap a turn's emit so a ``make_quiz`` tool_call event carries the public view only.

    Events are saved and replayed to views (a sidebar later): the answers, tests and rubrics
    the model wrote must stay in the loop's own state, which only the kernel holds.
    """

    def filtered(event: TurnEvent) -> object:
        match event:
            case ToolCallStarted(name=MakeQuizTool.name, arguments=arguments):
                event = event.model_copy(update={"arguments": _public_arguments(arguments)})
        return emit(event)

    return filtered


def _resolved(quiz_id: str, tool_call_id: str, outcome: QuizOutcome) -> QuizResolved:
    return QuizResolved(
        id=quiz_id,
        tool_call_id=tool_call_id,
        score=outcome.score,
        results=outcome.results,
        cancelled=outcome.cancelled,
        reason=outcome.reason,
    )


def _public_arguments(raw: str) -> str:
    try:
        return json.dumps(public_view(MakeQuizArgs.model_validate_json(raw)), ensure_ascii=False)
    except ValueError:
        return json.dumps({"note": "quiz arguments hidden (they were not valid)"})


def model_completer(model: ChatModel) -> Complete:
    """A small non-tool request to the turn's model (short answers are graded with it)."""

    async def complete(messages: list[dict[str, Any]]) -> str:
        wire = [cast(Message, m) for m in messages]  # role/content dicts, OpenAI form
        request = ChatRequest(model=model.model, messages=wire, max_tokens=300, temperature=0)
        parts = [e.text async for e in model.stream(request) if isinstance(e, TextDelta)]
        return "".join(parts)

    return complete


QUIZ_KINDS = ("quiz", "review")  # make_quiz in a turn; %tutor review (no turn to continue)


class QuizCoordinator:
    """Quizzes and reviews, kinds of deferred call (interaction/pending.py): the quiz with its
    answers is kept in the learning tables; the pending row every surface lists carries only
    the public view."""

    def __init__(
        self,
        store: LearningStore,
        calls: PendingCalls,
        audit: AuditLog,
        *,
        sandbox: Any = None,
        expiry_seconds: float = 24 * 3600,
    ) -> None:
        self.store = store
        self.calls = calls
        self.audit = audit
        self._sandbox = sandbox  # learning/sandbox.Sandbox, made on the first code answer
        self.expiry_seconds = expiry_seconds
        self.graders: dict[str, Complete | None] = {}  # quiz id -> the model call for short
        self.on_graded: Callable[[QuizRow, QuizOutcome], None] | None = None  # L1 traces
        kind = QuizKind(self)
        for name in QUIZ_KINDS:
            calls.kinds[name] = kind

    # asking ------------------------------------------------------------------------------
    async def ask(
        self,
        *,
        session_id: str,
        turn_id: str,
        call: ToolCall,
        args: MakeQuizArgs,
        emit: Emit,
        snapshot: dict[str, Any] | None = None,
        grader: Complete | None = None,
        place: dict[str, Any] | None = None,
        supersedes: list[str] | None = None,
        on_saved: Callable[[str], None] | None = None,
    ) -> ToolResult:
        row = self.open_quiz(
            session_id, turn_id, call.id, "tool", args, snapshot, grader, place=place
        )
        if on_saved is not None and snapshot is not None:
            on_saved(row.quiz_id)
        self.calls.drop_states(list(supersedes or []))
        body = self.form_body(row)

        def stopped() -> None:
            if self._close(row.quiz_id, "cancelled", QuizOutcome.closed(CANCELLED)):
                emit(_resolved(row.quiz_id, call.id, QuizOutcome.closed(CANCELLED)))
                self._audit("cancelled", row, reason="turn_stopped")

        try:
            result = await self.calls.wait(
                self._pending_row(row.quiz_id),
                self.expiry_seconds,
                shown=lambda: emit(QuizRequired.model_validate(body)),
                on_cancel=stopped,
            )
        finally:
            self.graders.pop(row.quiz_id, None)
        outcome = QuizOutcome.model_validate(result)
        emit(_resolved(row.quiz_id, call.id, outcome))
        return tool_result_of(outcome)

    def open_quiz(
        self,
        session_id: str,
        turn_id: str,
        tool_call_id: str,
        kind: str,
        args: MakeQuizArgs,
        snapshot: dict[str, Any] | None = None,
        grader: Complete | None = None,
        extra: dict[str, Any] | None = None,
        place: dict[str, Any] | None = None,
    ) -> QuizRow:
        """Save the quiz (answers in the learning tables) and its pending row (public view,
        owner, place; the paused turn with it), in that order: a listed quiz can be graded."""
        now = time.time()
        spec = {"quiz": args.model_dump(mode="json"), **(extra or {})}
        row = QuizRow(
            f"quiz_{uuid.uuid4().hex[:16]}",
            session_id,
            turn_id,
            tool_call_id,
            kind,
            args.objective,
            spec,
            "pending",
            now,
            now + self.expiry_seconds,
            None,
            None,
        )
        self.store.add_quiz(row)
        self._add_pending(row, snapshot, place)
        self.graders[row.quiz_id] = grader
        self._audit("asked", row)
        return row

    def _add_pending(
        self, row: QuizRow, snapshot: dict[str, Any] | None, place: dict[str, Any] | None
    ) -> None:
        owner = self.calls.owner
        # A review has no turn waiting on it: no owner, answered and graded wherever it is.
        waits = row.kind == "tool" and owner is not None
        self.calls.store.add_pending(
            PendingRow(
                row.quiz_id,
                row.session_id,
                row.turn_id,
                row.tool_call_id,
                self.form_body(row),
                "pending",
                row.created_at,
                row.expires_at,
                None,
                None,
                owner.id if waits and owner is not None else None,
                place,
                "quiz" if row.kind == "tool" else "review",
            ),
            snapshot,
        )

    def adopt_old_quizzes(self) -> int:
        """Open quizzes a version before the one pending table saved only in ``quizzes``:
        each gets its pending row, and its paused turn moves to ``turn_states``."""
        adopted = 0
        for row, state in self.store.quizzes_not_listed():
            self._add_pending(row, state, None)
            self.store.forget_old_state(row.quiz_id)
            adopted += 1
        return adopted

    @staticmethod
    def form_body(row: QuizRow) -> dict[str, Any]:
        """What the form gets: ids, times and the public view; never the answers."""
        quiz = MakeQuizArgs.model_validate(row.spec["quiz"])
        return {
            "id": row.quiz_id,
            "tool_call_id": row.tool_call_id,
            "session_id": row.session_id,
            "kind": row.kind,
            "expires_at": row.expires_at,
            **public_view(quiz),
        }

    def is_live(self, quiz_id: str) -> bool:
        return self.calls.is_live(quiz_id)

    def _pending_row(self, quiz_id: str) -> PendingRow:
        row = self.calls.store.get_pending(quiz_id)
        assert row is not None, "open_quiz saved it"
        return row

    # answering ---------------------------------------------------------------------------
    async def submit(
        self,
        session_id: str,
        quiz_id: str,
        answers: dict[str, Any],
        seconds: float | None = None,
        grader: Complete | None = None,
    ) -> QuizOutcome:
        """Grade once, from any process: the answers are read from the store, never from a
        surface. The turn goes on where the owner rule says (interaction/pending.py); a quiz
        whose turn can go on nowhere is still graded (mastery, review cards)."""
        pending, row = self._open(session_id, quiz_id)
        quiz = MakeQuizArgs.model_validate(row.spec["quiz"])
        try:
            check_answers(quiz, answers)
        except QuizAnswerError as exc:
            self._audit("rejected", row, reason="invalid")
            raise InvalidQuizAnswer(str(exc)) from None
        route = self.calls.route(pending)
        if not self.calls.store.hold_pending(quiz_id):
            self._audit("rejected", row, reason="duplicate")
            raise QuizClosed("This quiz was already submitted; its grade stands.")
        try:
            grader = grader or self.graders.get(quiz_id)
            results = await self.grade(quiz, answers, grader)
        except BaseException:
            self.calls.store.release_pending(quiz_id)  # nothing lost: submit again
            raise
        outcome = QuizOutcome.graded(results)
        wire = outcome.wire()
        self.calls.store.resolve_pending(quiz_id, "answered", wire, time.time(), was="grading")
        self.store.finish_quiz(quiz_id, "answered", wire)
        record_grades(self.store, row, quiz, results, seconds)
        choices = [f"{r.id}:{g}" for r in results if isinstance(r.given, list) for g in r.given]
        self._audit("answered", row, selections=choices, reason=f"score={outcome.score}")
        self.calls.deliver(pending, route, wire)
        if self.on_graded is not None:
            try:
                self.on_graded(row, outcome)
            except Exception:  # a trace that cannot be written must not lose the grade
                logger.warning("could not record the quiz trace", exc_info=True)
        return outcome

    def _open(self, session_id: str, quiz_id: str) -> tuple[PendingRow, QuizRow]:
        pending = self.calls.store.get_pending(quiz_id)
        row = self.store.get_quiz(quiz_id)
        if pending is None or row is None or pending.kind not in QUIZ_KINDS:
            raise UnknownQuiz(f"There is no quiz with id {quiz_id!r}.")

        def reject(_session: str, _request: str, _call: str, reason: str) -> None:
            self._audit("rejected", row, reason=reason)

        pending = open_row(
            self.calls,
            pending,
            session_id,
            reject,
            words=("quiz", "submitted"),
            closed=lambda _row: "This quiz was already submitted; its grade stands.",
        )
        return pending, row

    async def grade(
        self, quiz: MakeQuizArgs, answers: dict[str, Any], grader: Complete | None
    ) -> list[QuestionResult]:
        results = []
        for q in quiz.questions:
            given = answers.get(q.id, empty_answer(q))
            if is_blank(q, given):  # no grader runs on a blank (no model call, no sandbox)
                results.append(not_answered(q, given))
            elif isinstance(q, ChoiceQuestion):
                results.append(grade_choice(q, list(given)))
            elif isinstance(q, NumericQuestion):
                results.append(grade_numeric(q, str(given)))
            elif isinstance(q, ShortQuestion):
                results.append(await grade_short(q, str(given), grader))
            elif isinstance(q, CodeQuestion):
                from deeptutor_jupyter.learning.sandbox import Sandbox, grade_code

                if self._sandbox is None:
                    self._sandbox = await asyncio.to_thread(Sandbox)  # probes the isolation once
                results.append(await grade_code(q, str(given), self._sandbox))
        return results

    def cancel(self, session_id: str, quiz_id: str) -> None:
        _, row = self._open(session_id, quiz_id)
        if self._close(quiz_id, "cancelled", QuizOutcome.closed(CANCELLED)):
            self._audit("cancelled", row, reason="learner")
            self.calls.resolve_waiter(quiz_id, QuizOutcome.closed("learner_cancelled").wire())

    def expire(self, quiz_id: str) -> bool:
        row = self.store.get_quiz(quiz_id)
        if row is None or not self._close(quiz_id, "expired", QuizOutcome.closed(EXPIRED)):
            return False
        self._audit("expired", row, reason="timeout")
        self.calls.resolve_waiter(quiz_id, QuizOutcome.closed(EXPIRED).wire())
        return True

    def _close(self, quiz_id: str, status: str, outcome: QuizOutcome) -> bool:
        """Consumed once in the pending table; the learning record follows."""
        if not self.calls.store.resolve_pending(quiz_id, status, outcome.wire(), time.time()):
            return False
        self.store.finish_quiz(quiz_id, status, outcome.wire())
        return True

    def _audit(self, event: Any, row: QuizRow, **fields: Any) -> None:
        """Ids, times and outcomes only: never the learner's text or code."""
        try:
            self.audit.write(
                event,
                session_id=row.session_id,
                request_id=row.quiz_id,
                tool_call_id=row.tool_call_id,
                asked_at=row.created_at if event != "asked" else None,
                **fields,
            )
        except OSError:
            logger.warning("could not write the quiz audit log", exc_info=True)


def tool_result_of(outcome: QuizOutcome) -> ToolResult:
    wire = outcome.wire()
    if outcome.cancelled:
        reason = "timed out" if outcome.reason == "timeout" else "cancelled"
        return ToolResult(
            content=json.dumps(wire, ensure_ascii=False),
            data=wire,
            summary=f"quiz {reason}",
            stop_turn=True,
        )
    blanks = f", {outcome.blank} not answered" if outcome.blank else ""
    return ToolResult(
        content=json.dumps(wire, ensure_ascii=False),
        data=wire,
        summary=f"quiz graded: {outcome.right}/{len(outcome.results)} right{blanks}, "
        f"score {outcome.score}",
    )


class QuizKind:
    """Quizzes and reviews as kinds of deferred call (interaction/pending.py)."""

    def __init__(self, coordinator: QuizCoordinator) -> None:
        self.coordinator = coordinator

    def expire(self, request_id: str) -> bool:
        return self.coordinator.expire(request_id)

    def tool_result(self, result: Result) -> ToolResult:
        return tool_result_of(QuizOutcome.model_validate(result))

    def resolved_event(self, row: PendingRow, result: Result) -> QuizResolved:
        return _resolved(row.request_id, row.tool_call_id, QuizOutcome.model_validate(result))
