"""Spaced review with FSRS: every graded question becomes a card the ``fsrs`` library schedules.

The mapping from a graded answer to an FSRS rating (docs/learning.md):

- wrong (score 0)                                        -> Again
- partly right (0 < score < 1, e.g. 2 of 3 options)      -> Hard
- right                                                  -> Good
- right on the first attempt of a new card, and quickly
  (at most ``QUICK_SECONDS`` per question)               -> Easy

Fuzzing is off so a schedule can be reproduced and tested against the library itself. ``fsrs``
is imported lazily: ``%load_ext`` must stay light.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fsrs import Scheduler

AGAIN, HARD, GOOD, EASY = 1, 2, 3, 4
RATING_NAMES = {AGAIN: "again", HARD: "hard", GOOD: "good", EASY: "easy"}
QUICK_SECONDS = 30.0


def rating_for(score: float, *, first_try: bool, seconds: float | None = None) -> int:
    if score <= 0:
        return AGAIN
    if score < 1:
        return HARD
    if first_try and seconds is not None and seconds <= QUICK_SECONDS:
        return EASY
    return GOOD


_scheduler: list[Scheduler] = []


def scheduler() -> Scheduler:
    if not _scheduler:
        from fsrs import Scheduler

        _scheduler.append(Scheduler(enable_fuzzing=False))
    return _scheduler[0]


def new_card(card_id: int, now: datetime | None = None) -> dict[str, Any]:
    from fsrs import Card

    return dict(Card(card_id=card_id, due=now or datetime.now(UTC)).to_dict())


def review(
    card: dict[str, Any], rating: int, now: datetime | None = None
) -> tuple[dict[str, Any], datetime, dict[str, Any]]:
    """The rescheduled card, its next due time, and the review log (all JSON-ready)."""
    from fsrs import Card, Rating

    reviewed, log = scheduler().review_card(
        Card.from_dict(card),  # type: ignore[arg-type]
        Rating(rating),
        now or datetime.now(UTC),
    )
    return dict(reviewed.to_dict()), reviewed.due, dict(log.to_dict())


def retrievability(card: dict[str, Any], now: datetime | None = None) -> float:
    from fsrs import Card

    return float(scheduler().get_card_retrievability(Card.from_dict(card), now))  # type: ignore[arg-type]


def due_of(card: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(card["due"]))
