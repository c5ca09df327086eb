"""``make_quiz``: intercepted like ``ask_user``, graded by code, the grade is the tool result.

``QuizCoordinator.ask`` saves the quiz (answers included, in the kernel's store only), emits
``quiz_required`` with the public view (no answers), and waits on a Future of this process.
``submit`` is the one door a form uses: it checks the answers are readable, claims the quiz once,
grades it (choice and numeric by code, code in the sandbox, short answers by the model in a small
separate request), records mastery evidence and review cards, writes an audit line without free
text, and resolves the Future; the waiting tool call returns the graded result.

A ``review`` quiz (``%tutor review``) has no tool call: its grades reschedule existing cards.
``submit`` may be called from any thread through ``submit_soon``; grading runs on the loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
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
)
from deeptutor_jupyter.learning import review as fsrs_review
from deeptutor_jupyter.learning.mastery import guess_rate
from deeptutor_jupyter.learning.quiz import (
    ChoiceQuestion,
    CodeQuestion,
    MakeQuizArgs,
    NumericQuestion,
    QuestionResult,
    QuizAnswerError,
    ShortQuestion,
    check_answers,
    empty_answer,
    grade_choice,
    grade_numeric,
    public_view,
    quiz_result,
)
from deeptutor_jupyter.learning.short_answer import Complete, grade_short
from deeptutor_jupyter.messages import Message
from deeptutor_jupyter.providers.base import ChatModel, ChatRequest, TextDelta, ToolCall
from deeptutor_jupyter.store.learning import LearningStore, QuizRow
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult

logger = logging.getLogger(__name__)

Result = dict[str, Any]
CANCELLED: Result = {"cancelled": True, "reason": "turn_stopped", "score": None, "results": []}
EXPIRED: Result = {"cancelled": True, "reason": "timeout", "score": None, "results": []}


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


def _resolved(quiz_id: str, tool_call_id: str, result: Result) -> QuizResolved:
    return QuizResolved.model_validate({"id": quiz_id, "tool_call_id": tool_call_id, **result})


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


class QuizCoordinator:
    def __init__(
        self,
        store: LearningStore,
        audit: AuditLog,
        *,
        sandbox: Any = None,
        expiry_seconds: float = 24 * 3600,
    ) -> None:
        self.store = store
        self.audit = audit
        self._sandbox = sandbox  # learning/sandbox.Sandbox, made on the first code answer
        self.expiry_seconds = expiry_seconds
        self._waiters: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future[Result]]] = {}
        self.graders: dict[str, Complete | None] = {}  # quiz id -> the model call for short
        # Set by the kernel: a quiz answered after its turn's kernel died; gets (row, result).
        self.on_orphan: Callable[[QuizRow, Result], None] | None = None
        self.on_graded: Callable[[QuizRow, Result], None] | None = None  # L1 traces

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
    ) -> ToolResult:
        row = self.open_quiz(session_id, turn_id, call.id, "tool", args, snapshot, grader)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Result] = loop.create_future()
        self._waiters[row.quiz_id] = (loop, future)
        timer = loop.call_later(self.expiry_seconds, self.expire, row.quiz_id)
        emit(QuizRequired.model_validate(self.form_body(row)))
        try:
            result = await future
        except asyncio.CancelledError:
            if self.store.finish_quiz(row.quiz_id, "cancelled", CANCELLED):
                emit(_resolved(row.quiz_id, call.id, CANCELLED))
                self._audit("cancelled", row, reason="turn_stopped")
            raise
        finally:
            timer.cancel()
            self._waiters.pop(row.quiz_id, None)
            self.graders.pop(row.quiz_id, None)
        emit(_resolved(row.quiz_id, call.id, result))
        return tool_result_of(result)

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
    ) -> QuizRow:
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
        self.store.add_quiz(row, snapshot)
        self.graders[row.quiz_id] = grader
        self._audit("asked", row)
        return row

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
        return quiz_id in self._waiters

    # answering ---------------------------------------------------------------------------
    async def submit(
        self,
        session_id: str,
        quiz_id: str,
        answers: dict[str, Any],
        seconds: float | None = None,
        grader: Complete | None = None,
    ) -> Result:
        row = self._open_row(session_id, quiz_id)
        quiz = MakeQuizArgs.model_validate(row.spec["quiz"])
        try:
            check_answers(quiz, answers)
        except QuizAnswerError as exc:
            self._audit("rejected", row, reason="invalid")
            raise InvalidQuizAnswer(str(exc)) from None
        if not self.store.claim_quiz(quiz_id):
            self._audit("rejected", row, reason="duplicate")
            raise QuizClosed("This quiz was already submitted; its grade stands.")
        try:
            grader = grader or self.graders.get(quiz_id)
            results = await self.grade(quiz, answers, grader)
        except BaseException:
            self.store.release_quiz(quiz_id)  # nothing lost: the learner can submit again
            raise
        result = quiz_result(results)
        self.store.finish_quiz(quiz_id, "answered", result)
        self._record(row, quiz, results, seconds)
        choices = [f"{r.id}:{g}" for r in results if isinstance(r.given, list) for g in r.given]
        self._audit("answered", row, selections=choices, reason=f"score={result['score']}")
        waiter = self._waiters.get(quiz_id)
        if waiter is not None:
            _resolve_soon(waiter, result)
        elif row.kind == "tool" and self.on_orphan is not None:
            self.on_orphan(row, result)
        if self.on_graded is not None:
            try:
                self.on_graded(row, result)
            except Exception:  # a trace that cannot be written must not lose the grade
                logger.warning("could not record the quiz trace", exc_info=True)
        return result

    def _open_row(self, session_id: str, quiz_id: str) -> QuizRow:
        row = self.store.get_quiz(quiz_id)
        if row is None:
            raise UnknownQuiz(f"There is no quiz with id {quiz_id!r}.")
        if row.session_id != session_id:
            self._audit("rejected", row, reason="foreign_session")
            raise ForeignQuiz("This quiz belongs to another session; it was not submitted.")
        if row.status == "pending" and time.time() >= row.expires_at:
            self.expire(quiz_id)
            row = self.store.get_quiz(quiz_id) or row
        if row.status == "expired":
            raise QuizExpired("This quiz timed out before it was submitted.")
        if row.status != "pending":
            self._audit("rejected", row, reason="duplicate")
            raise QuizClosed("This quiz was already submitted; its grade stands.")
        return row

    async def grade(
        self, quiz: MakeQuizArgs, answers: dict[str, Any], grader: Complete | None
    ) -> list[QuestionResult]:
        results = []
        for q in quiz.questions:
            given = answers.get(q.id, empty_answer(q))
            if isinstance(q, ChoiceQuestion):
                results.append(grade_choice(q, list(given)))
            elif isinstance(q, NumericQuestion):
                results.append(grade_numeric(q, str(given)))
            elif isinstance(q, ShortQuestion):
                results.append(await grade_short(q, str(given), grader))
            elif isinstance(q, CodeQuestion):
                from deeptutor_jupyter.learning.sandbox import Sandbox, grade_code

                if self._sandbox is None:
                    self._sandbox = await asyncio.to_thread(Sandbox)  # probes bwrap once
                results.append(await grade_code(q, str(given), self._sandbox))
        return results

    def cancel(self, session_id: str, quiz_id: str) -> None:
        row = self._open_row(session_id, quiz_id)
        if self.store.finish_quiz(quiz_id, "cancelled", CANCELLED):
            self._audit("cancelled", row, reason="learner")
            if (waiter := self._waiters.get(quiz_id)) is not None:
                _resolve_soon(waiter, dict(CANCELLED, reason="learner_cancelled"))

    def expire(self, quiz_id: str) -> bool:
        row = self.store.get_quiz(quiz_id)
        if row is None or not self.store.finish_quiz(quiz_id, "expired", EXPIRED):
            return False
        self._audit("expired", row, reason="timeout")
        if (waiter := self._waiters.get(quiz_id)) is not None:
            _resolve_soon(waiter, dict(EXPIRED))
        return True

    # what a graded quiz leaves behind ----------------------------------------------------
    def _record(
        self,
        row: QuizRow,
        quiz: MakeQuizArgs,
        results: list[QuestionResult],
        seconds: float | None,
    ) -> None:
        """Mastery evidence per question, and a review card per question (FSRS)."""
        by_id = {q.id: q for q in quiz.questions}
        cards: dict[str, int] = row.spec.get("cards", {})
        objectives: dict[str, str] = row.spec.get("objectives", {})
        per_question = seconds / len(results) if seconds is not None and results else None
        evidence = []
        now = datetime.now(UTC)
        for r in results:
            q = by_id[r.id]
            objective = objectives.get(r.id, quiz.objective)
            options = len(q.options) if isinstance(q, ChoiceQuestion) else 0
            if objective:
                evidence.append(
                    (objective, row.quiz_id, r.id, r.score, guess_rate(q.kind, options))
                )
            card_id = cards.get(r.id)
            first = card_id is None
            if card_id is None:
                card_id = self.store.new_card_id(objective, q.model_dump(mode="json"))
                card = fsrs_review.new_card(card_id, now)
            else:
                existing = self.store.get_card(card_id)
                if existing is None:
                    continue
                card = existing.card
            rating = fsrs_review.rating_for(r.score, first_try=first, seconds=per_question)
            card, due, log = fsrs_review.review(card, rating, now)
            self.store.save_card(card_id, card, due.timestamp(), rating, log)
        if evidence:
            self.store.add_evidence(evidence)

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


def tool_result_of(result: Result) -> ToolResult:
    if result.get("cancelled"):
        reason = "timed out" if result.get("reason") == "timeout" else "cancelled"
        return ToolResult(
            content=json.dumps(result, ensure_ascii=False),
            data=result,
            summary=f"quiz {reason}",
            stop_turn=True,
        )
    right = sum(1 for r in result["results"] if r["correct"])
    return ToolResult(
        content=json.dumps(result, ensure_ascii=False),
        data=result,
        summary=f"quiz graded: {right}/{len(result['results'])} right, score {result['score']}",
    )


def _resolve_soon(
    waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[Result]], result: Result
) -> None:
    loop, future = waiter

    def resolve() -> None:
        if not future.done():
            future.set_result(result)

    loop.call_soon_threadsafe(resolve)
