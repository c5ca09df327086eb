"""make_quiz arguments, and grading of choice, numeric and short answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from deeptutor_jupyter.learning.quiz import (
    ChoiceQuestion,
    MakeQuizArgs,
    NumericQuestion,
    QuizAnswerError,
    QuizOutcome,
    ShortQuestion,
    check_answers,
    grade_choice,
    grade_numeric,
    public_view,
)
from deeptutor_jupyter.learning.short_answer import grade_short, grading_messages, parse_grading

ISSUE_EXAMPLE: dict[str, Any] = {
    "title": "Eigenvalues, check 1",
    "objective": "eigenvalues",
    "questions": [
        {
            "id": "q1",
            "kind": "choice",
            "prompt": "Which?",
            "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}],
            "answer": ["b"],
            "explanation": "Because B.",
        },
        {
            "id": "q2",
            "kind": "numeric",
            "prompt": "v?",
            "answer": 3.0,
            "tolerance": 0.01,
            "unit": "m/s",
        },
        {"id": "q3", "kind": "short", "prompt": "Why?", "reference": "REF-TEXT", "rubric": "RUB"},
        {
            "id": "q4",
            "kind": "code",
            "prompt": "f",
            "starter": "def f(x):\n    ...",
            "tests": "assert f(2) == 4",
            "timeout_s": 5,
        },
    ],
}


def quiz() -> MakeQuizArgs:
    return MakeQuizArgs.model_validate(ISSUE_EXAMPLE)


def test_the_issue_example_validates_into_four_kinds():
    q = quiz()
    assert [type(x).__name__ for x in q.questions] == [
        "ChoiceQuestion",
        "NumericQuestion",
        "ShortQuestion",
        "CodeQuestion",
    ]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda a: a["questions"][0].update(answer=["B"]), "not among the option ids"),
        (lambda a: a["questions"][1].update(id="q1"), "question ids must be unique"),
        (lambda a: a["questions"][0].update(kind="essay"), "kind"),
        (lambda a: a["questions"][3].update(timeout_s=300), "timeout_s"),
        (lambda a: a.update(questions=[]), "questions"),
    ],
)
def test_bad_arguments_say_what_to_fix(change, words):
    args = json.loads(json.dumps(ISSUE_EXAMPLE))
    change(args)
    with pytest.raises(ValidationError) as exc:
        MakeQuizArgs.model_validate(args)
    assert words in str(exc.value)


def test_public_view_holds_no_answer_reference_rubric_or_tests():
    text = json.dumps(public_view(quiz()))
    for secret in ('"answer"', "REF-TEXT", "RUB", "assert f(2)", "Because B."):
        assert secret not in text
    assert "def f(x)" in text and "m/s" in text


def choice(answer: list[str]) -> ChoiceQuestion:
    opts = [{"id": i, "label": i.upper()} for i in "abcd"]
    return ChoiceQuestion(id="c", kind="choice", prompt="p", options=opts, answer=answer)


def test_choice_one_correct_id():
    assert grade_choice(choice(["b"]), ["b"]).correct
    wrong = grade_choice(choice(["b"]), ["a"])
    assert not wrong.correct and wrong.score == 0 and "B" in wrong.feedback


def test_choice_several_correct_ids_all_needed_partial_credit():
    q = choice(["a", "c"])
    assert grade_choice(q, ["c", "a"]).correct
    half = grade_choice(q, ["a"])
    assert not half.correct and half.score == 0.5
    assert grade_choice(q, ["a", "b"]).score == 0.0  # one hit, one wrong pick


def numeric(tol: float = 0.01, unit: str = "m/s") -> NumericQuestion:
    return NumericQuestion(id="n", kind="numeric", prompt="p", answer=3.0, tolerance=tol, unit=unit)


@pytest.mark.parametrize("given", ["3", "3.005", "2.99 m/s", "3.0m/s", "3 m / s", "3e0"])
def test_numeric_within_tolerance_with_or_without_unit(given):
    assert grade_numeric(numeric(), given).correct


@pytest.mark.parametrize("given", ["3.02", "-3", "3 km/h", "3 s"])
def test_numeric_outside_tolerance_or_wrong_unit(given):
    result = grade_numeric(numeric(), given)
    assert not result.correct and result.score == 0


def test_wrong_unit_is_named_in_the_feedback():
    assert "'km/h' is not the unit asked for (m/s)" in grade_numeric(numeric(), "3 km/h").feedback


def test_zero_tolerance_forgives_float_rounding_only():
    q = NumericQuestion(id="n", kind="numeric", prompt="p", answer=0.3)
    assert grade_numeric(q, str(0.1 + 0.2)).correct
    assert not grade_numeric(q, "0.3001").correct


def test_unreadable_answers_are_refused_for_fixing_not_graded():
    with pytest.raises(QuizAnswerError, match="not a number"):
        check_answers(quiz(), {"q2": "three"})
    with pytest.raises(QuizAnswerError, match="not an option"):
        check_answers(quiz(), {"q1": ["z"]})
    with pytest.raises(QuizAnswerError, match="choose one"):
        check_answers(quiz(), {"q1": ["a", "b"]})
    with pytest.raises(QuizAnswerError, match="No question"):
        check_answers(quiz(), {"q9": "x"})
    check_answers(quiz(), {"q1": ["b"], "q2": "3 m/s", "q3": "because", "q4": "def f(x): ..."})


def test_a_text_or_code_answer_over_its_limit_is_refused_with_the_limit():
    from deeptutor_jupyter import limits

    with pytest.raises(QuizAnswerError, match=f"the limit is {limits.ANSWER_CHARS:,} characters"):
        check_answers(quiz(), {"q3": "x" * (limits.ANSWER_CHARS + 1)})
    with pytest.raises(QuizAnswerError, match=f"the limit is {limits.CODE_ANSWER_CHARS:,}"):
        check_answers(quiz(), {"q4": "#" * (limits.CODE_ANSWER_CHARS + 1)})
    check_answers(quiz(), {"q3": "x" * limits.ANSWER_CHARS, "q4": "#" * (limits.ANSWER_CHARS + 1)})


def test_result_shape_is_the_issue_shape():
    results = [grade_choice(choice(["b"]), ["b"]), grade_numeric(numeric(), "4")]
    out = QuizOutcome.graded(results).wire()
    assert out["score"] == 0.5
    assert out["results"][0] == {"id": "c", "correct": True, "given": ["b"], "feedback": "Correct."}


def short() -> ShortQuestion:
    return ShortQuestion(id="s", kind="short", prompt="Why?", reference="ref", rubric="rub")


def test_short_request_carries_question_reference_rubric_and_answer():
    messages = grading_messages(short(), "my answer")
    body = json.loads(messages[1]["content"])
    assert body == {
        "question": "Why?",
        "reference_answer": "ref",
        "rubric": "rub",
        "learner_answer": "my answer",
    }
    assert "JSON" in messages[0]["content"]


@pytest.mark.parametrize(
    ("reply", "correct", "score"),
    [
        ('{"score": 0.9, "feedback": "Good."}', True, 0.9),
        ('```json\n{"score": 0.2, "feedback": "Missing X."}\n```', False, 0.2),
        ('{"score": 7}', True, 1.0),
        ("I think it is fine", False, 0.0),
        ('{"score": "high"}', False, 0.0),
    ],
)
def test_short_reply_parsing_is_marked_graded_by_the_tutor(reply, correct, score):
    result = parse_grading(short(), "x", reply)
    assert (result.correct, result.score) == (correct, score)
    # Marked once, by graded_by; the feedback does not repeat it (the receipt showed it twice).
    assert result.graded_by == "tutor" and "graded by the tutor" not in result.feedback
    assert QuizOutcome.graded([result]).results[0].graded_by == "graded by the tutor"


async def test_short_grading_uses_the_injected_call_and_survives_its_failure():
    seen: list[Any] = []

    async def complete(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return '{"score": 1, "feedback": "Yes."}'

    assert (await grade_short(short(), "because", complete)).correct
    assert len(seen) == 1

    async def broken(messages: list[dict[str, Any]]) -> str:
        raise RuntimeError("down")

    failed = await grade_short(short(), "because", broken)
    assert not failed.correct and "Grading failed" in failed.feedback
    empty = await grade_short(short(), "  ", complete)
    assert not empty.correct and len(seen) == 1  # no request for an empty answer


def test_a_grade_is_one_typed_value_from_the_store_to_every_receipt():
    """The stored and sent form (``wire``) reads back as the same value, through the
    ``quiz_resolved`` event too; a half score, the tutor's grading and a blank survive."""
    from deeptutor_jupyter.agent.events import QuizResolved
    from deeptutor_jupyter.learning.quiz import QuestionResult

    graded = QuizOutcome.graded(
        [
            grade_choice(choice(["b"]), ["b"]),
            QuestionResult(
                id="s", correct=False, given="x", feedback="Half.", score=0.5, graded_by="tutor"
            ),
            QuestionResult(id="n", correct=False, given="", feedback="", score=0, answered=False),
        ]
    )
    wire = graded.wire()
    assert wire["results"][1] == {
        "id": "s",
        "correct": False,
        "given": "x",
        "feedback": "Half.",
        "score": 0.5,
        "graded_by": "graded by the tutor",
    }
    assert wire["results"][2]["answered"] is False and "answered" not in wire["results"][0]
    assert (graded.right, graded.blank, graded.score) == (1, 1, 0.5)
    for outcome in (graded, QuizOutcome.closed("timeout")):
        again = QuizOutcome.model_validate(json.loads(json.dumps(outcome.wire())))
        assert again == outcome
        event = QuizResolved(id="quiz_1", tool_call_id="call_1", **outcome.wire())
        assert event.outcome == outcome
    assert QuizOutcome.closed("timeout").wire() == {
        "cancelled": True,
        "reason": "timeout",
        "score": None,
        "results": [],
    }
