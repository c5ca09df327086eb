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
- **Requests without tools** that name no exercise are the kernel's own work, not a tutor's
  turn: grading a quiz answer, the memory's upkeep, a book's pages, the setup check. They count
  on a daily ladder of their own (``BACKGROUND_PER_DAY`` per student), so a quiz under a hints
  policy keeps working and a hand-made request without tools still meets a cap.
- Only counts and a hash of the question are stored, never its text.

The instructor sees per exercise how many students asked, the hints asked and the ladder depth
they reached (``by_exercise``), released as hub/mastery.py releases mastery: a figure is
computed again only once at least ``min_group_size`` students took a new rung since the last
one, so no figure is shown for fewer students and two figures cannot be subtracted to find one
student's numbers.
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
BACKGROUND_PER_DAY = 60
BACKGROUND = "~background "  # + the UTC day: the ladder of requests without tools

hints = sa.Table(
    "deeptutor_policy_hints",
    metadata,
    sa.Column("student", sa.String(255), primary_key=True),
    sa.Column("exercise", sa.String(MAX_EXERCISE_CHARS), primary_key=True),
    sa.Column("question", sa.String(64), primary_key=True),  # sha256 of the question
    sa.Column("rung", sa.Integer, nullable=False),
    sa.Column("rounds", sa.Integer, nullable=False),
    sa.Column("asked", sa.String(32), nullable=False),
    # Taken since the exercise's shown figure was last computed.
    sa.Column("pending", sa.Integer, nullable=False, server_default="1"),
    sa.UniqueConstraint("student", "exercise", "rung", name="deeptutor_policy_hints_rung"),
)
help_shown = sa.Table(
    "deeptutor_policy_help_shown",
    metadata,
    sa.Column("exercise", sa.String(MAX_EXERCISE_CHARS), primary_key=True),
    sa.Column("students", sa.Integer, nullable=False),
    sa.Column("hints", sa.Integer, nullable=False),
    sa.Column("mean_depth", sa.Float, nullable=False),
    sa.Column("deepest", sa.Integer, nullable=False),
    sa.Column("computed", sa.String(32), nullable=False),
)


@dataclass(frozen=True)
class HelpRow:
    """One exercise on the instructor's page: how many students asked, and the figure last
    released (None until one was): hints asked, the mean and the deepest rung reached."""

    exercise: str
    students: int
    hints: int | None = None
    mean_depth: float | None = None
    deepest: int | None = None
    shown_students: int | None = None


@dataclass(frozen=True)
class HintTaken:
    """``rung`` of the ladder this request belongs to, or ``refused`` with why."""

    rung: int = 0
    refused: str = ""  # "cap" or "rounds"


def exercise_of(header: str | None) -> str:
    """The exercise a request names, cut to what the table holds; "" when it names none."""
    return (header or "").strip()[:MAX_EXERCISE_CHARS]


def ladder_of(header: str | None, raw: dict[str, Any], cap: int, day: str) -> tuple[str, int]:
    """The ladder a request counts on, and its cap."""
    exercise = exercise_of(header)
    if not exercise and not raw.get("tools"):
        return BACKGROUND + day, BACKGROUND_PER_DAY
    return exercise, cap


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
        metadata.create_all(engine, tables=[hints, help_shown])

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

    def by_exercise(self, min_students: int) -> list[HelpRow]:
        """Per exercise: the students who asked, and the figure last released; computed again
        when at least ``min_students`` students have taken a rung since."""
        stamp = self.clock().isoformat(timespec="seconds")
        out = []
        with self.engine.begin() as conn:
            asked = sa.func.count(sa.distinct(hints.c.student))
            pending = sa.func.count(
                sa.distinct(sa.case((hints.c.pending == 1, hints.c.student), else_=None))
            )
            counts = conn.execute(
                sa.select(hints.c.exercise, asked, pending)
                .where(~hints.c.exercise.startswith(BACKGROUND))
                .group_by(hints.c.exercise)
                .order_by(hints.c.exercise)
            ).all()
            released = {
                str(r.exercise): (int(r.students), int(r.hints), float(r.mean_depth), r.deepest)
                for r in conn.execute(sa.select(help_shown))
            }
            for exercise, n, new in counts:
                if n >= min_students and new >= min_students:
                    released[exercise] = self._release(conn, exercise, stamp)
                last = released.get(exercise)
                if last is None:
                    out.append(HelpRow(str(exercise), int(n)))
                else:
                    shown_n, total, mean, top = last
                    out.append(HelpRow(str(exercise), int(n), total, mean, int(top), shown_n))
        return out

    def _release(
        self, conn: sa.Connection, exercise: str, stamp: str
    ) -> tuple[int, int, float, int]:
        mine = hints.c.exercise == exercise
        deepest = (
            sa.select(sa.func.max(hints.c.rung).label("depth"))
            .where(mine)
            .group_by(hints.c.student)
            .subquery()
        )
        n, mean, top = conn.execute(
            sa.select(sa.func.count(), sa.func.avg(deepest.c.depth), sa.func.max(deepest.c.depth))
        ).one()
        total = conn.execute(sa.select(sa.func.count()).select_from(hints).where(mine)).scalar_one()
        figure = (int(n), int(total), round(float(mean), 1), int(top))
        conn.execute(help_shown.delete().where(help_shown.c.exercise == exercise))
        conn.execute(
            help_shown.insert().values(
                exercise=exercise,
                students=figure[0],
                hints=figure[1],
                mean_depth=figure[2],
                deepest=figure[3],
                computed=stamp,
            )
        )
        conn.execute(hints.update().where(mine).values(pending=0))
        return figure
