"""BKT mastery, the gates of a path, and FSRS scheduling against the fsrs library itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fsrs import Card, Rating, Scheduler

from deeptutor_jupyter.learning import review
from deeptutor_jupyter.learning.mastery import (
    BKTParams,
    Evidence,
    Mastery,
    estimate,
    guess_rate,
    update,
)
from deeptutor_jupyter.learning.path import (
    LearningPath,
    PathError,
    current,
    objectives_in_tutor_md,
    parse_path_reply,
    path_from_lines,
    standing_block,
    statuses,
)


def test_bkt_update_matches_the_formula_by_hand():
    # p=0.2, slip 0.1, guess 0.05, learn 0.15, a right answer:
    # posterior = 0.18 / (0.18 + 0.04) = 0.81818..., then + (1 - 0.81818) * 0.15
    assert update(0.2, Evidence(1.0, 0.05)) == pytest.approx(0.81818 + 0.18182 * 0.15, abs=1e-4)
    # a wrong answer: 0.02 / (0.02 + 0.8 * 0.95) = 0.025641..., then learning
    assert update(0.2, Evidence(0.0, 0.05)) == pytest.approx(0.025641 + 0.974359 * 0.15, abs=1e-4)


def test_partial_score_lands_between_wrong_and_right():
    wrong, half, right = (update(0.4, Evidence(s, 0.25)) for s in (0.0, 0.5, 1.0))
    assert wrong < half < right
    assert half == pytest.approx((wrong + right) / 2)


def test_a_guessable_right_answer_is_weaker_evidence():
    assert update(0.2, Evidence(1.0, guess_rate("choice", 2))) < update(0.2, Evidence(1.0, 0.05))
    assert guess_rate("choice", 4) == 0.25 and guess_rate("code") == 0.05


def test_mastery_needs_enough_right_answers():
    right = Evidence(1.0, 0.25)
    assert not estimate([right, right]).mastered  # too little evidence, however good
    assert estimate([right, right, right]).mastered
    assert not estimate([right, right, Evidence(0.0, 0.25, ts=9)]).mastered
    assert estimate([]).p == BKTParams().p_init and estimate([]).confidence == "no evidence yet"


def test_estimate_replays_in_time_order():
    a, b = Evidence(1.0, 0.05, ts=1), Evidence(0.0, 0.05, ts=2)
    assert estimate([b, a]) == estimate([a, b])


PATH = path_from_lines("Linear algebra", "1. Vectors\n2. Matrices: products\n- Eigenvalues")


def test_path_from_lines_strips_bullets_and_makes_ids():
    assert [o.id for o in PATH.objectives] == ["vectors", "matrices", "eigenvalues"]
    assert PATH.objectives[1].description == "products"
    with pytest.raises(PathError, match="objectives"):
        path_from_lines("x", "\n  \n")


def test_gates_open_one_objective_at_a_time():
    done = Mastery(0.95, 4)
    assert [s for _, s in statuses(PATH, {})] == ["open", "locked", "locked"]
    assert [s for _, s in statuses(PATH, {"vectors": done})] == ["mastered", "open", "locked"]
    # High but thin evidence does not open the gate.
    assert [s for _, s in statuses(PATH, {"vectors": Mastery(0.99, 1)})][1] == "locked"
    # Mastery of a locked objective does not jump the gate before it.
    assert current(PATH, {"matrices": done}).id == "vectors"
    assert current(PATH, {o.id: done for o in PATH.objectives}) is None


def test_standing_block_says_where_the_learner_stands():
    text = standing_block(PATH, {"vectors": Mastery(0.95, 4)}, due_reviews=2)
    assert "[mastered] vectors" in text and "[open] matrices" in text
    assert "[locked] eigenvalues" in text and "2 review cards are due" in text
    assert "cannot declare an objective mastered" in text


def test_model_path_reply_is_validated():
    path = parse_path_reply(
        "Calc",
        '```json\n{"objectives": [{"title": "Limits", '
        '"description": "What a limit is"}, "Derivatives"]}\n```',
    )
    assert isinstance(path, LearningPath) and [o.id for o in path.objectives] == [
        "limits",
        "derivatives",
    ]
    with pytest.raises(PathError, match="did not propose"):
        parse_path_reply("Calc", "Sure! First learn limits.")


def test_objectives_from_a_course_tutor_md():
    text = "# Course\nintro\n## Objectives\n- Limits\n- Derivatives: rules\n## Other\n- no"
    assert objectives_in_tutor_md(text) == ["Limits", "Derivatives: rules"]
    assert objectives_in_tutor_md("# nothing here") == []


@pytest.mark.parametrize(
    ("score", "first", "seconds", "rating"),
    [
        (0.0, True, 5, review.AGAIN),
        (0.5, True, 5, review.HARD),
        (1.0, False, 5, review.GOOD),
        (1.0, True, None, review.GOOD),
        (1.0, True, 120, review.GOOD),
        (1.0, True, 5, review.EASY),
    ],
)
def test_rating_mapping(score, first, seconds, rating):
    assert review.rating_for(score, first_try=first, seconds=seconds) == rating


def test_scheduling_matches_the_fsrs_library():
    start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    ours = review.new_card(42, start)
    theirs = Card(card_id=42, due=start)
    lib = Scheduler(enable_fuzzing=False)
    now = start
    for rating in (review.GOOD, review.GOOD, review.AGAIN, review.GOOD, review.EASY, review.HARD):
        ours, due, log = review.review(ours, rating, now)
        theirs, _ = lib.review_card(theirs, Rating(rating), now)
        assert due == theirs.due
        assert ours == theirs.to_dict()
        assert log["rating"] == rating
        now = due + timedelta(hours=1)
    assert review.due_of(ours) == theirs.due
    assert 0 < review.retrievability(ours, now) <= 1


def test_a_wrong_answer_comes_back_sooner_than_a_right_one():
    start = datetime(2026, 1, 5, tzinfo=UTC)
    _, due_again, _ = review.review(review.new_card(1, start), review.AGAIN, start)
    _, due_easy, _ = review.review(review.new_card(2, start), review.EASY, start)
    assert due_again < due_easy
