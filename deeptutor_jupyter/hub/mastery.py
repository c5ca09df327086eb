"""Mastery reports: numbers per course objective, bounded, and shown so no one can be singled out.

- **Bounded.** A report names only objectives of the course: those the ``## Objectives`` list
  of a published pack's TUTOR.md gives (the ids the kernel computes the same way,
  runtime/course.py ``course_objectives``). So a student's rows are at most one per course
  objective, each replaced by the next report (an upsert); values are in [0, 1], answer counts
  whole numbers up to a million, a report at most ``MAX_OBJECTIVES_PER_REPORT`` objectives, and
  a student sends at most ``REPORTS_PER_MINUTE`` reports a UTC minute, counted in the database
  so that replicas share the limit.
- **Not differenced.** An aggregate the instructor sees (mean, how many mastered) is computed
  anew only when at least ``min_group_size`` students have reported since it was last computed
  (their rows are marked ``pending`` until then); otherwise the page keeps showing the previous
  figure. Two figures of one objective therefore always differ by the reports of at least that
  many students, and subtracting them cannot isolate one student's value. The live count of
  students who reported is shown; it tells who reported, never what.
- **Deletable.** The instructor may forget an objective or a student. Forgetting a student also
  hides the figures of their objectives until enough new reports arrive, so the figure before
  and after the deletion cannot be subtracted either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import sqlalchemy as sa

from deeptutor_jupyter.hub.quota import (
    Clock,
    add_column,
    insert_missing,
    metadata,
    run_sql,
    utc_now,
)

MAX_OBJECTIVES_PER_REPORT = 200
REPORTS_PER_MINUTE = 10
MASTERED_P, MASTERED_ANSWERS = 0.85, 3

mastery = sa.Table(
    "deeptutor_mastery",
    metadata,
    sa.Column("student", sa.String(255), primary_key=True),
    sa.Column("objective", sa.String(255), primary_key=True),
    sa.Column("value", sa.Float, nullable=False),
    # Graded answers behind the value (the kernel's BKT evidence count), never the answers.
    sa.Column("answers", sa.Integer, nullable=False, server_default="0"),
    sa.Column("updated", sa.String(32), nullable=False),
    # Reported since the objective's shown figure was last computed.
    sa.Column("pending", sa.Integer, nullable=False, server_default="1"),
)
shown = sa.Table(
    "deeptutor_mastery_shown",
    metadata,
    sa.Column("objective", sa.String(255), primary_key=True),
    sa.Column("students", sa.Integer, nullable=False),
    sa.Column("mean", sa.Float, nullable=False),
    sa.Column("mastered", sa.Integer, nullable=False),
    sa.Column("computed", sa.String(32), nullable=False),
)

report_minute = sa.Table(
    "deeptutor_report_minute",
    metadata,
    sa.Column("student", sa.String(255), primary_key=True),
    sa.Column("kind", sa.String(16), primary_key=True),
    sa.Column("minute", sa.BigInteger, primary_key=True),
    sa.Column("count", sa.Integer, nullable=False, default=0),
)
_TAKE_REPORT_SLOT = """INSERT INTO deeptutor_report_minute (student, kind, minute, count)
VALUES (:student, :kind, :minute, 1)
ON CONFLICT (student, kind, minute) DO UPDATE SET count = deeptutor_report_minute.count + 1
WHERE deeptutor_report_minute.count < :limit"""
_SWEEP_REPORT_SLOTS = """DELETE FROM deeptutor_report_minute
WHERE student = :student AND kind = :kind AND minute < :minute"""


@dataclass(frozen=True)
class MasteryRow:
    """One objective on the instructor's page: how many students reported it, and the figure
    last released (``mean``/``mastered`` of ``shown_students``), None until one was."""

    objective: str
    students: int
    mean: float | None
    mastered: int | None
    shown_students: int | None = None


def mastery_values(raw: bytes, objectives: set[str]) -> dict[str, tuple[float, int]] | str:
    """``{"objective-id": {"p": 0.7, "n": 3}, ...}`` (or a bare probability), else the reason.

    Numbers only, and only for the course's objectives: an objective's id, its mastery
    probability and how many graded answers it rests on. Anything else refuses the report whole.
    """
    try:
        data = json.loads(raw or b"")
    except ValueError:
        return "The body is not JSON."
    if not isinstance(data, dict) or not data or len(data) > MAX_OBJECTIVES_PER_REPORT:
        return (
            f"Send an object of up to {MAX_OBJECTIVES_PER_REPORT} objective ids mapped to "
            "numbers between 0 and 1."
        )
    if not objectives:
        return "The course lists no objectives yet (a pack's TUTOR.md ## Objectives)."
    out: dict[str, tuple[float, int]] = {}
    for key, value in data.items():
        if not isinstance(key, str) or key not in objectives:
            shown_key = key[:60] if isinstance(key, str) else key
            return f"{shown_key!r} is not one of the course's objectives."
        p, n = (value.get("p"), value.get("n", 0)) if isinstance(value, dict) else (value, 0)
        if isinstance(value, dict) and not set(value) <= {"p", "n"}:
            return f"The report of {key} may hold only p (mastery) and n (graded answers)."
        if not isinstance(p, int | float) or isinstance(p, bool) or not 0 <= p <= 1:
            return f"The mastery of {key} must be a number between 0 and 1."
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 1_000_000:
            return f"The count of graded answers of {key} must be a whole number."
        out[key] = (float(p), n)
    return out


class ReportLimiter:
    """At most ``per_minute`` reports of a kind (``mastery``, ``score``) per student and UTC
    minute, counted in the shared database: every replica enforces the same limit.

    One conditional upsert takes a slot (as the chat's per-minute limit does, hub/quota.py), so
    two replicas on one PostgreSQL never let more through between them."""

    def __init__(
        self, engine: sa.Engine, clock: Clock = utc_now, per_minute: int = REPORTS_PER_MINUTE
    ) -> None:
        self.engine, self.clock, self.per_minute = engine, clock, per_minute
        metadata.create_all(engine, tables=[report_minute])

    def wait_for(self, student: str, kind: str = "mastery") -> int:
        """0 when the report may go now (it is counted), else the seconds until it may."""
        now = self.clock()
        minute = int(now.timestamp() // 60)
        params = {"student": student, "kind": kind, "minute": minute}
        with self.engine.begin() as conn:
            taken = run_sql(conn, _TAKE_REPORT_SLOT, {**params, "limit": self.per_minute}) == 1
            run_sql(conn, _SWEEP_REPORT_SLOTS, params)  # the student's earlier minutes
        return 0 if taken else max(1, 60 - now.second)


class MasteryStore:
    def __init__(self, engine: sa.Engine, clock: Clock = utc_now) -> None:
        self.engine = engine
        self.clock = clock
        metadata.create_all(engine, tables=[mastery, shown])
        add_column(engine, "deeptutor_mastery", "pending", "INTEGER NOT NULL DEFAULT 1")

    def report(self, student: str, values: dict[str, tuple[float, int]]) -> None:
        """The student's latest mastery per objective: (probability, graded answers)."""
        stamp = self.clock().isoformat(timespec="seconds")
        with self.engine.begin() as conn:
            for objective, (value, answers) in sorted(values.items()):
                key = {"student": student, "objective": objective}
                fields = {"value": value, "answers": answers, "updated": stamp, "pending": 1}
                insert_missing(conn, mastery, {**key, **fields})
                conn.execute(
                    mastery.update()
                    .where(mastery.c.student == student, mastery.c.objective == objective)
                    .values(**fields)
                )

    def by_objective(self, min_students: int) -> list[MasteryRow]:
        """Per objective: how many students reported, and the figure last released; a figure
        is computed again when at least ``min_students`` reports are pending."""
        stamp = self.clock().isoformat(timespec="seconds")
        out = []
        with self.engine.begin() as conn:
            counts = conn.execute(
                sa.select(mastery.c.objective, sa.func.count(), sa.func.sum(mastery.c.pending))
                .group_by(mastery.c.objective)
                .order_by(mastery.c.objective)
            ).all()
            released = {
                str(r.objective): (int(r.students), float(r.mean), int(r.mastered))
                for r in conn.execute(sa.select(shown))
            }
            for objective, n, pending in counts:
                if n >= min_students and (pending or 0) >= min_students:
                    released[objective] = self._release(conn, objective, stamp)
                last = released.get(objective)
                if last is None:
                    out.append(MasteryRow(str(objective), int(n), None, None))
                else:
                    out.append(MasteryRow(str(objective), int(n), last[1], last[2], last[0]))
        return out

    def _release(self, conn: sa.Connection, objective: str, stamp: str) -> tuple[int, float, int]:
        done = sa.case(
            (sa.and_(mastery.c.value >= MASTERED_P, mastery.c.answers >= MASTERED_ANSWERS), 1),
            else_=0,
        )
        n, mean, mastered = conn.execute(
            sa.select(sa.func.count(), sa.func.avg(mastery.c.value), sa.func.sum(done)).where(
                mastery.c.objective == objective
            )
        ).one()
        figure = (int(n), round(float(mean), 2), int(mastered or 0))
        row = {"students": figure[0], "mean": figure[1], "mastered": figure[2], "computed": stamp}
        conn.execute(shown.delete().where(shown.c.objective == objective))
        conn.execute(shown.insert().values(objective=objective, **row))
        conn.execute(mastery.update().where(mastery.c.objective == objective).values(pending=0))
        return figure

    def forget_objective(self, objective: str) -> int:
        """Remove every student's row of an objective and its figure; how many rows went."""
        with self.engine.begin() as conn:
            conn.execute(shown.delete().where(shown.c.objective == objective))
            return int(
                conn.execute(mastery.delete().where(mastery.c.objective == objective)).rowcount
            )

    def forget_student(self, student: str) -> int:
        """Remove a student's rows. The figures of their objectives are withdrawn, and the
        other students' rows count as not pending, so the next figure needs that many new
        reports: the figures before and after cannot be subtracted."""
        with self.engine.begin() as conn:
            theirs = sa.select(mastery.c.objective).where(mastery.c.student == student)
            objectives = [str(o) for o in conn.execute(theirs).scalars()]
            gone = conn.execute(mastery.delete().where(mastery.c.student == student)).rowcount
            if objectives:
                conn.execute(shown.delete().where(shown.c.objective.in_(objectives)))
                conn.execute(
                    mastery.update().where(mastery.c.objective.in_(objectives)).values(pending=0)
                )
            return int(gone)
