"""The hints cap of a course pack's ``hints`` policy, counted at the gateway per student and
exercise, in the service's database: the same ladder whichever kernel (or ``curl``) asks.

- **An exercise** is what the kernel names in the ``X-DeepTutor-Exercise`` header (the
  notebook's file name and the cell's id, the same for every student of a handed-out
  notebook). A request that names none counts on one ladder per student (``""``), so leaving
  the header out gains nothing.
- **A hint** is a question: the request's last ``user`` message. Every request that asks a new
  question of an exercise takes the next rung; the later rounds of the same turn (tool
  results, the same question) do not, up to ``ROUNDS_PER_HINT`` requests, so replaying a
  counted question with other messages after it does not get an unbounded conversation.
- Only counts and a hash of the question are stored, never its text.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from deeptutor_jupyter.hub.quota import Clock, metadata, utc_now

EXERCISE_HEADER = "X-DeepTutor-Exercise"
MAX_EXERCISE_CHARS = 200
# A turn is at most ``max_rounds`` requests (8 by default, docs/settings.md); three times that
# leaves room for retries and a learner's higher setting.
ROUNDS_PER_HINT = 24

hints = sa.Table(
    "deeptutor_policy_hints",
    metadata,
    sa.Column("student", sa.String(255), primary_key=True),
    sa.Column("exercise", sa.String(MAX_EXERCISE_CHARS), primary_key=True),
    sa.Column("question", sa.String(64), primary_key=True),  # sha256 of the question
    sa.Column("rung", sa.Integer, nullable=False),
    sa.Column("rounds", sa.Integer, nullable=False),
    sa.Column("asked", sa.String(32), nullable=False),
    sa.UniqueConstraint("student", "exercise", "rung", name="deeptutor_policy_hints_rung"),
)


@dataclass(frozen=True)
class HintTaken:
    """``rung`` of the ladder this request belongs to, or ``refused`` with why."""

    rung: int = 0
    refused: str = ""  # "cap" or "rounds"


def exercise_of(header: str | None) -> str:
    """The exercise a request names, cut to what the table holds; "" when it names none."""
    return (header or "").strip()[:MAX_EXERCISE_CHARS]


def question_of(raw: dict[str, Any]) -> str:
    """A hash of the request's last ``user`` message (its question)."""
    said: Any = ""
    for message in reversed(raw.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            said = message.get("content")
            break
    text = json.dumps(said, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class HintStore:
    def __init__(self, engine: sa.Engine, clock: Clock = utc_now) -> None:
        self.engine, self.clock = engine, clock
        metadata.create_all(engine, tables=[hints])

    def take(self, student: str, exercise: str, question: str, cap: int) -> HintTaken:
        """Count this request on the student's ladder for the exercise (one transaction; the
        unique rung makes two replicas taking the same rung at once fail one of them)."""
        for _ in range(3):
            try:
                return self._take(student, exercise, question, cap)
            except sa.exc.IntegrityError:
                continue  # another request took that rung meanwhile: read again
        return HintTaken(refused="cap")

    def _take(self, student: str, exercise: str, question: str, cap: int) -> HintTaken:
        key = (
            (hints.c.student == student)
            & (hints.c.exercise == exercise)
            & (hints.c.question == question)
        )
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(hints.c.rung, hints.c.rounds).where(key)).first()
            if row is not None:
                if row.rounds >= ROUNDS_PER_HINT:
                    return HintTaken(row.rung, "rounds")
                conn.execute(hints.update().where(key).values(rounds=hints.c.rounds + 1))
                return HintTaken(row.rung)
            used = conn.execute(
                sa.select(sa.func.count())
                .select_from(hints)
                .where((hints.c.student == student) & (hints.c.exercise == exercise))
            ).scalar_one()
            if used >= cap:
                return HintTaken(used, "cap")
            stamp = self.clock().isoformat(timespec="seconds")
            conn.execute(
                hints.insert().values(
                    student=student,
                    exercise=exercise,
                    question=question,
                    rung=used + 1,
                    rounds=1,
                    asked=stamp,
                )
            )
            return HintTaken(used + 1)
