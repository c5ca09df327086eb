"""Blanks (issue 21): a question left blank is graded "not answered", never sent to a grader,
and moves mastery and review scheduling less than a wrong answer (docs/learning.md "Blanks")."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.interaction.quiz import tool_result_of
from deeptutor_jupyter.interaction.quiz_record import record_grades
from deeptutor_jupyter.learning import review as fsrs_review
from deeptutor_jupyter.learning.quiz import (
    MakeQuizArgs,
    QuestionResult,
    QuizOutcome,
    is_blank,
    not_answered,
)
from deeptutor_jupyter.store.learning import LearningStore, QuizRow
from tests.learning.test_quiz_coordinator import QUIZ, coordinator, learning, start  # noqa: F401

ARGS = MakeQuizArgs.model_validate(QUIZ)
Q1, Q2, Q3, Q4 = ARGS.questions


@pytest.mark.parametrize(
    ("q", "given", "blank"),
    [
        (Q1, [], True),
        (Q1, ["a"], False),
        (Q2, "  ", True),
        (Q2, "0", False),
        (Q3, "\n", True),
        (Q3, "no idea", False),
        (Q4, "def sq(x):\n    ...\n", True),  # the starter left as it was
        (Q4, "", True),
        (Q4, "def sq(x):\n    return 0", False),
    ],
)
def test_what_counts_as_blank(q, given, blank):
    assert is_blank(q, given) is blank


def test_a_blank_is_marked_not_answered_for_the_model_and_the_receipt():
    blank = not_answered(Q1, [])
    assert (blank.correct, blank.score, blank.answered) == (False, 0.0, False)
    assert blank.feedback.startswith("Not answered.") and "The correct answer: 4" in blank.feedback
    wrong = QuestionResult(id="q2", correct=False, given="8", feedback="No.", score=0.0)
    result = QuizOutcome.graded([blank, wrong])
    assert result.results[0].answered is False
    assert "answered" not in result.wire()["results"][1]
    assert "1 not answered" in tool_result_of(result).summary
    assert "not answered" not in tool_result_of(QuizOutcome.graded([wrong])).summary


async def never_grade(messages: list[dict[str, Any]]) -> str:
    raise AssertionError("a blank must not be sent to the model")


async def test_blanks_reach_no_grader_and_give_no_evidence_and_no_card(coordinator, learning):  # noqa: F811
    task, emitted = await start(coordinator, never_grade)
    quiz_id = emitted[0][1]["id"]
    # q1 wrong; q2 and q3 left empty; q4 the starter unchanged (sent as the panel and cell do).
    answers = {"q1": ["a"], "q4": QUIZ["questions"][3]["starter"]}
    result = await coordinator.submit("s-1", quiz_id, answers, seconds=20)
    await task
    by_id = {r["id"]: r for r in result.wire()["results"]}
    assert by_id["q1"]["correct"] is False and "answered" not in by_id["q1"]
    assert [by_id[q].get("answered") for q in ("q2", "q3", "q4")] == [False] * 3
    assert result.score == 0.0
    # The wrong answer is evidence and a card rated Again; the blanks are neither.
    assert [(row[0], row[1]) for row in learning.evidence()] == [("squares", 0.0)]
    cards = learning.cards()
    assert len(cards) == 1 and cards[0].question["id"] == "q1"


def _row(spec: dict[str, Any]) -> QuizRow:
    now = time.time()
    return QuizRow("r1", "s", "t", "c", "review", "squares", spec, "pending", now, now, None, None)


def test_a_blank_in_a_review_leaves_the_card_as_it_was_a_wrong_answer_resets_it(tmp_path: Path):
    store = LearningStore(tmp_path / "state.db")
    try:
        q = ARGS.questions[0]
        long_ago = datetime(2026, 1, 1, tzinfo=UTC)
        ids = []
        for _ in range(2):  # two cards of the same question, both learnt well (reviewed Good)
            card_id = store.new_card_id("squares", q.model_dump(mode="json"))
            card, due, log = fsrs_review.review(
                fsrs_review.new_card(card_id, long_ago), fsrs_review.GOOD, long_ago
            )
            store.save_card(card_id, card, due.timestamp(), fsrs_review.GOOD, log)
            ids.append(card_id)
        quiz = MakeQuizArgs.model_validate({**QUIZ, "questions": [QUIZ["questions"][0]]})
        before = {c: json.dumps(store.get_card(c).card) for c in ids}  # type: ignore[union-attr]
        record_grades(store, _row({"cards": {"q1": ids[0]}}), quiz, [not_answered(q, [])], 5)
        record_grades(
            store,
            _row({"cards": {"q1": ids[1]}}),
            quiz,
            [QuestionResult(id="q1", correct=False, given=["a"], feedback="No.", score=0.0)],
            5,
        )
        blank_card, wrong_card = (store.get_card(c) for c in ids)
        assert blank_card is not None and wrong_card is not None
        assert json.dumps(blank_card.card) == before[ids[0]]  # untouched: still due, no rating
        assert json.dumps(wrong_card.card) != before[ids[1]]  # rated Again: relearning
        assert [e[1] for e in store.evidence()] == [0.0]  # the wrong answer's only
    finally:
        store.close()
