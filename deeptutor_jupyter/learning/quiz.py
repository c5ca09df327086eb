"""The ``make_quiz`` arguments and the grading that needs no model and no process.

The model writes the quiz, answers included; the learner's form never sees the answers
(kernel/widgets/quiz_card.py gets :func:`public_view`). Choice and numeric questions are graded
here by code. Short answers are graded by the model in a separate request
(learning/short_answer.py) and code answers by running the tests in a sandbox
(learning/sandbox.py); both come back as the same :class:`QuestionResult`.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from deeptutor_jupyter import limits
from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.lazy_model import LazyModel

MAX_QUESTIONS = 20
TUTOR_GRADED = "graded by the tutor"


class Option(LazyModel):
    id: str = Field(min_length=1, description="Stable id the learner's choice is sent back as.")
    label: str = Field(min_length=1, description="What the learner reads.")


class _Question(LazyModel):
    id: str = Field(min_length=1, description="Unique within the quiz, e.g. q1.")
    prompt: str = Field(min_length=1, description="The question, Markdown with $LaTeX$.")
    explanation: str = Field("", description="Shown to the learner after submission.")


class ChoiceQuestion(_Question):
    kind: Literal["choice"]
    options: list[Option] = Field(min_length=2, description="At least two options.")
    answer: list[str] = Field(
        min_length=1, description="Ids of every correct option (several: the learner ticks all)."
    )

    @model_validator(mode="after")
    def _answer_is_an_option(self) -> ChoiceQuestion:
        ids = [o.id for o in self.options]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"option ids must be unique; repeated: {', '.join(repeated)}")
        unknown = [a for a in self.answer if a not in ids]
        if unknown:
            raise ValueError(
                f"answer {unknown} is not among the option ids {ids}; "
                "answer must list option ids, not labels"
            )
        return self

    @property
    def multiple(self) -> bool:
        return len(self.answer) > 1


class NumericQuestion(_Question):
    kind: Literal["numeric"]
    answer: float = Field(description="The correct value, as a number.")
    tolerance: float = Field(0.0, ge=0, description="Accepted absolute difference.")
    unit: str = Field("", description="Unit of the answer, e.g. m/s; empty for a pure number.")

    @field_validator("answer")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("answer must be a finite number")
        return value


class ShortQuestion(_Question):
    kind: Literal["short"]
    reference: str = Field(min_length=1, description="A model answer the grader compares with.")
    rubric: str = Field("", description="What a correct answer must contain.")


class CodeQuestion(_Question):
    kind: Literal["code"]
    starter: str = Field("", description="Code the learner starts from.")
    tests: str = Field(
        min_length=1,
        description="Python assert statements run against the learner's code, in a sandbox.",
    )
    timeout_s: float = Field(5.0, gt=0, le=30, description="Seconds the tests may run.")


Question = Annotated[
    ChoiceQuestion | NumericQuestion | ShortQuestion | CodeQuestion, Field(discriminator="kind")
]


class MakeQuizArgs(LazyModel):
    title: str = Field(min_length=1, description="The quiz title, one line.")
    objective: str = Field(
        "", description="The learning objective this quiz checks (an id of the learner's path)."
    )
    questions: list[Question] = Field(min_length=1, max_length=MAX_QUESTIONS)

    @model_validator(mode="after")
    def _unique_ids(self) -> MakeQuizArgs:
        ids = [q.id for q in self.questions]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"question ids must be unique; repeated: {', '.join(repeated)}")
        return self


class QuestionResult(LazyModel):
    id: str
    correct: bool
    given: Any
    feedback: str
    score: float = Field(ge=0, le=1)  # 1 right, 0 wrong, between: partly right
    # "none": not graded at all (a code answer where no sandbox may run it): no mastery evidence.
    graded_by: Literal["code", "tests", "tutor", "none"] = "code"
    # False: left blank (docs/learning.md "Blanks"): shown as not answered, no mastery evidence,
    # no review rating.
    answered: bool = True


class QuizAnswerError(DeepTutorError, ValueError):
    """An answer the form must send back for fixing (not a wrong answer: an unreadable one)."""

    code = "quiz_answer"


def public_view(quiz: MakeQuizArgs) -> dict[str, Any]:
    """What a browser may see before submission: no answers, references, rubrics or tests."""
    questions = []
    for q in quiz.questions:
        item: dict[str, Any] = {"id": q.id, "kind": q.kind, "prompt": q.prompt}
        if isinstance(q, ChoiceQuestion):
            item["options"] = [o.model_dump() for o in q.options]
            item["multiple"] = q.multiple
        elif isinstance(q, NumericQuestion):
            item["unit"] = q.unit
        elif isinstance(q, CodeQuestion):
            item["starter"] = q.starter
        questions.append(item)
    return {"title": quiz.title, "objective": quiz.objective, "questions": questions}


def check_answers(quiz: MakeQuizArgs, answers: dict[str, Any]) -> None:
    """Raise QuizAnswerError for an answer that cannot be graded as given (fixable by the learner).

    A missing answer is not an error: it is graded as not answered (:func:`not_answered`).
    """
    known = {q.id: q for q in quiz.questions}
    unknown = [key for key in answers if key not in known]
    if unknown:
        raise QuizAnswerError(f"No question with id {', '.join(map(repr, unknown))} in this quiz.")
    for qid, given in answers.items():
        q = known[qid]
        if isinstance(q, ChoiceQuestion):
            if not isinstance(given, list) or not all(isinstance(g, str) for g in given):
                raise QuizAnswerError(f"{qid}: a choice answer is a list of option ids.")
            ids = {o.id for o in q.options}
            bad = [g for g in given if g not in ids]
            if bad:
                raise QuizAnswerError(f"{qid}: not an option: {', '.join(map(repr, bad))}.")
            if not q.multiple and len(given) > 1:
                raise QuizAnswerError(f"{qid}: choose one option.")
        elif isinstance(q, NumericQuestion):
            if str(given).strip():
                parse_quantity(str(given))  # raises QuizAnswerError in words
        elif not isinstance(given, str):
            raise QuizAnswerError(f"{qid}: the answer must be text.")
        else:
            limit = limits.CODE_ANSWER_CHARS if isinstance(q, CodeQuestion) else limits.ANSWER_CHARS
            if len(given) > limit:
                raise QuizAnswerError(f"{qid}: " + limits.too_long("the answer", len(given), limit))


def grade_choice(q: ChoiceQuestion, given: list[str]) -> QuestionResult:
    chosen, right = set(given), set(q.answer)
    if chosen == right:
        return QuestionResult(
            id=q.id, correct=True, given=sorted(chosen), score=1.0, feedback=_with(q, "Correct.")
        )
    hits = len(chosen & right)
    # Partial credit for several correct options: hits minus wrong picks, over what was needed.
    score = max(0.0, (hits - len(chosen - right)) / len(right)) if q.multiple else 0.0
    labels = {o.id: o.label for o in q.options}
    want = ", ".join(labels[a] for a in q.answer)
    words = "Not quite." if score > 0 else "Not correct."
    if not chosen:
        words = "No option was chosen."
    return QuestionResult(
        id=q.id,
        correct=False,
        given=sorted(chosen),
        score=round(score, 3),
        feedback=_with(q, f"{words} The correct answer: {want}."),
    )


_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")


def parse_quantity(text: str) -> tuple[float, str]:
    """``"3.0 m/s"`` -> ``(3.0, "m/s")``; the unit may be absent. Raises QuizAnswerError."""
    m = _NUMBER.match(text.replace("\u2212", "-"))
    if m is None:
        raise QuizAnswerError(
            f"{text.strip()!r} is not a number (write e.g. 3.5, -2e-3 or 3.5 m/s)."
        )
    value = float(m.group(1))
    if not math.isfinite(value):
        raise QuizAnswerError(f"{text.strip()!r} is not a finite number.")
    return value, m.group(2)


def _same_unit(a: str, b: str) -> bool:
    """Units compare without spaces ("m / s" is "m/s"); case matters (mS is not ms)."""
    return "".join(a.split()) == "".join(b.split())


def grade_numeric(q: NumericQuestion, given: str) -> QuestionResult:
    """Within ``tolerance`` (absolute; a zero tolerance still forgives float rounding)."""
    expected = f"{q.answer:g}{' ' + q.unit if q.unit else ''}"
    if not given.strip():
        return _wrong(q, given, f"No answer was given. The answer: {expected}.")
    value, unit = parse_quantity(given)
    if unit and not _same_unit(unit, q.unit):
        why = (
            f"The unit {unit!r} is not the unit asked for ({q.unit})."
            if q.unit
            else f"This answer is a plain number; {unit!r} does not belong to it."
        )
        return _wrong(q, given, f"{why} The answer: {expected}.")
    tolerance = max(q.tolerance, 1e-9 * max(1.0, abs(q.answer)))
    if abs(value - q.answer) <= tolerance:
        return QuestionResult(
            id=q.id, correct=True, given=given, score=1.0, feedback=_with(q, "Correct.")
        )
    within = f" (±{q.tolerance:g})" if q.tolerance else ""
    return _wrong(q, given, f"Not correct. The answer: {expected}{within}.")


def _wrong(q: _Question, given: Any, words: str) -> QuestionResult:
    return QuestionResult(id=q.id, correct=False, given=given, score=0.0, feedback=_with(q, words))


def _with(q: _Question, words: str) -> str:
    return f"{words} {q.explanation}".strip() if q.explanation else words


def is_blank(q: _Question, given: Any) -> bool:
    """Nothing chosen, nothing typed, or the starter code left as it was."""
    if isinstance(q, ChoiceQuestion):
        return not given
    text = str(given).strip()
    if isinstance(q, CodeQuestion):
        return not text or text == q.starter.strip()
    return not text


def not_answered(q: _Question, given: Any) -> QuestionResult:
    """A blank: score 0 like a wrong answer in the quiz's score, but marked ``answered=False``
    so it gives no mastery evidence and no review rating (interaction/quiz_record.py)."""
    words = "Not answered."
    if isinstance(q, ChoiceQuestion):
        labels = {o.id: o.label for o in q.options}
        words += f" The correct answer: {', '.join(labels[a] for a in q.answer)}."
    elif isinstance(q, NumericQuestion):
        words += f" The answer: {q.answer:g}{' ' + q.unit if q.unit else ''}."
    return QuestionResult(
        id=q.id, correct=False, given=given, score=0.0, feedback=_with(q, words), answered=False
    )


def empty_answer(q: _Question) -> Any:
    return [] if isinstance(q, ChoiceQuestion) else ""


class GradedItem(LazyModel):
    """One question's grade as the model, the receipts and the trace read it."""

    model_config = ConfigDict(frozen=True)

    id: str
    correct: bool
    given: Any = None
    feedback: str = ""
    score: float | None = Field(None, description="Only a partial score (between 0 and 1).")
    graded_by: str | None = Field(None, description="Set when the tutor, not code, graded it.")
    answered: bool = True  # False: left blank (docs/learning.md "Blanks")

    def wire(self) -> dict[str, Any]:
        """``{id, correct, given, feedback}``; ``score``, ``graded_by``, ``answered`` only
        when they say something."""
        data = self.model_dump(mode="json", exclude={"score", "graded_by", "answered"})
        if self.score is not None:
            data["score"] = self.score
        if self.graded_by is not None:
            data["graded_by"] = self.graded_by
        if not self.answered:
            data["answered"] = False
        return data


class QuizOutcome(LazyModel):
    """How a quiz ended: graded (``score``, ``results``) or closed unanswered (``cancelled``,
    ``reason``). The one value every surface reads; the store and the model get :meth:`wire`."""

    model_config = ConfigDict(frozen=True)

    score: float | None = None
    results: list[GradedItem] = Field(default_factory=list)
    cancelled: bool = False
    reason: str = Field("", description="timeout | turn_stopped | learner_cancelled.")

    @classmethod
    def graded(cls, results: list[QuestionResult]) -> QuizOutcome:
        """The score is the mean of the question scores, so a half-right multiple choice
        counts half."""
        score = sum(r.score for r in results) / len(results) if results else 0.0
        items = [
            GradedItem(
                id=r.id,
                correct=r.correct,
                given=r.given,
                feedback=r.feedback,
                score=r.score if r.score not in (0.0, 1.0) else None,
                graded_by=TUTOR_GRADED if r.graded_by == "tutor" else None,
                answered=r.answered,
            )
            for r in results
        ]
        return cls(score=round(score, 3), results=items)

    @classmethod
    def closed(cls, reason: str) -> QuizOutcome:
        return cls(cancelled=True, reason=reason)

    @property
    def right(self) -> int:
        return sum(1 for r in self.results if r.correct)

    @property
    def blank(self) -> int:
        return sum(1 for r in self.results if not r.answered)

    def wire(self) -> dict[str, Any]:
        """Graded: ``{"score", "results": [...]}``; closed: ``{"cancelled": true, "reason",
        "score": null, "results": []}``."""
        if self.cancelled:
            return {"cancelled": True, "reason": self.reason, "score": None, "results": []}
        return {"score": self.score, "results": [r.wire() for r in self.results]}
