"""What the service keeps of the LMS, in its own database (the quotas' engine, hub/quota.py).

- ``deeptutor_lti_user``: which LMS user (``sub``) a hub user is, per LMS context.
- ``deeptutor_lti_context``: the context's service URLs as its last launch gave them (AGS line
  items, NRPS memberships). Only URLs: the tokens for them are asked for when needed.
- ``deeptutor_lti_lineitem``: the instructor's mapping of a notebook (``pack/path``) or a
  course objective to a line item of the LMS gradebook.
- ``deeptutor_lti_score``: the score outbox (hub/lti/outbox.py). A row is only ever marked
  delivered, never deleted, so no grade is lost between a quiz and the gradebook.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from deeptutor_jupyter.hub.quota import Clock, insert_missing, metadata, utc_now

lti_user = sa.Table(
    "deeptutor_lti_user",
    metadata,
    sa.Column("student", sa.String(255), primary_key=True),
    sa.Column("context_id", sa.String(255), primary_key=True),
    sa.Column("lti_user", sa.String(255), nullable=False),
    sa.Column("instructor", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_launch", sa.String(32), nullable=False),
)
lti_context = sa.Table(
    "deeptutor_lti_context",
    metadata,
    sa.Column("context_id", sa.String(255), primary_key=True),
    sa.Column("title", sa.String(255), nullable=False, server_default=""),
    sa.Column("lineitems", sa.Text, nullable=False, server_default=""),
    sa.Column("memberships", sa.Text, nullable=False, server_default=""),
    sa.Column("updated", sa.String(32), nullable=False),
)
lti_lineitem = sa.Table(
    "deeptutor_lti_lineitem",
    metadata,
    # A notebook of a pack ("calc/kb/week1.ipynb") or a course objective's id.
    sa.Column("source", sa.String(500), primary_key=True),
    sa.Column("context_id", sa.String(255), primary_key=True),
    sa.Column("lineitem", sa.Text, nullable=False),
    # "quiz": quiz scores of the notebook; "mastery": the objective's mastery.
    sa.Column("kind", sa.String(16), nullable=False),
)
scores = sa.Table(
    "deeptutor_lti_score",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("student", sa.String(255), nullable=False),
    sa.Column("lti_user", sa.String(255), nullable=False),
    sa.Column("lineitem", sa.Text, nullable=False),
    sa.Column("source", sa.String(500), nullable=False),
    sa.Column("score_given", sa.Float, nullable=False),
    sa.Column("score_maximum", sa.Float, nullable=False),
    sa.Column("activity", sa.String(32), nullable=False),
    sa.Column("grading", sa.String(32), nullable=False),
    sa.Column("timestamp", sa.String(40), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_try", sa.BigInteger, nullable=False, index=True),
    sa.Column("last_error", sa.String(300), nullable=False, server_default=""),
    sa.Column("delivered", sa.String(32), nullable=True),
)
TABLES = [lti_user, lti_context, lti_lineitem, scores]


@dataclass(frozen=True)
class LineItemMap:
    source: str
    context_id: str
    lineitem: str
    kind: str


@dataclass(frozen=True)
class ScoreRow:
    id: int
    student: str
    lti_user: str
    lineitem: str
    source: str
    score_given: float
    score_maximum: float
    activity: str
    grading: str
    timestamp: str
    attempts: int
    next_try: int
    last_error: str
    delivered: str | None


class LTIStore:
    def __init__(self, engine: sa.Engine, clock: Clock = utc_now) -> None:
        self.engine = engine
        self.clock = clock
        metadata.create_all(engine, tables=TABLES)

    def _stamp(self) -> str:
        return self.clock().isoformat(timespec="seconds")

    # --- launches -----------------------------------------------------------------------------

    def record_launch(self, student: str, launch: dict[str, Any]) -> None:
        """Who the student is in the LMS context, and where the context's services are."""
        context = launch.get("context") or {}
        context_id = str(context.get("id", ""))
        if not context_id:
            return
        stamp = self._stamp()
        with self.engine.begin() as conn:
            user_row = {
                "lti_user": str(launch.get("lti_user", "")),
                "instructor": int(bool(launch.get("instructor"))),
                "last_launch": stamp,
            }
            key = {"student": student, "context_id": context_id}
            insert_missing(conn, lti_user, {**key, **user_row})
            conn.execute(
                lti_user.update()
                .where(lti_user.c.student == student, lti_user.c.context_id == context_id)
                .values(**user_row)
            )
            fields = {"title": str(context.get("title", "")), "updated": stamp}
            for name in ("lineitems", "memberships"):
                if launch.get(name):
                    fields[name] = str(launch[name])
            insert_missing(conn, lti_context, {"context_id": context_id, **fields})
            conn.execute(
                lti_context.update().where(lti_context.c.context_id == context_id).values(**fields)
            )
            notebook, item = str(launch.get("notebook") or ""), str(launch.get("lineitem") or "")
            if notebook and item:
                # A link with its own gradebook column: the notebook's quiz scores go there.
                self._map_in(conn, LineItemMap(notebook, context_id, item, "quiz"))

    def contexts(self) -> list[dict[str, str]]:
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(sa.select(lti_context))]

    def users(self, context_id: str | None = None) -> dict[str, str]:
        """LMS user id -> hub name (of one context, or all)."""
        query = sa.select(lti_user.c.lti_user, lti_user.c.student)
        if context_id is not None:
            query = query.where(lti_user.c.context_id == context_id)
        with self.engine.connect() as conn:
            return {str(r.lti_user): str(r.student) for r in conn.execute(query)}

    # --- line items ---------------------------------------------------------------------------

    def map_lineitem(self, mapping: LineItemMap) -> None:
        with self.engine.begin() as conn:
            self._map_in(conn, mapping)

    def _map_in(self, conn: sa.Connection, mapping: LineItemMap) -> None:
        conn.execute(
            lti_lineitem.delete().where(
                lti_lineitem.c.source == mapping.source,
                lti_lineitem.c.context_id == mapping.context_id,
            )
        )
        conn.execute(lti_lineitem.insert().values(**mapping.__dict__))

    def unmap_lineitem(self, source: str, context_id: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                lti_lineitem.delete().where(
                    lti_lineitem.c.source == source, lti_lineitem.c.context_id == context_id
                )
            )

    def lineitems(self) -> list[LineItemMap]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(lti_lineitem).order_by(lti_lineitem.c.source))
            return [LineItemMap(**r._mapping) for r in rows]

    # --- scores -------------------------------------------------------------------------------

    def queue_score(
        self,
        student: str,
        source: str,
        kind: str,
        given: float,
        maximum: float,
        *,
        completed: bool,
    ) -> int:
        """Queue the student's score for every line item ``source`` maps to in a context the
        student launched from; how many were queued (0: not mapped, or not an LMS student)."""
        now = self.clock()
        queued = 0
        with self.engine.begin() as conn:
            targets = conn.execute(
                sa.select(lti_lineitem.c.lineitem, lti_user.c.lti_user)
                .join(lti_user, lti_user.c.context_id == lti_lineitem.c.context_id)
                .where(
                    lti_lineitem.c.source == source,
                    lti_lineitem.c.kind == kind,
                    lti_user.c.student == student,
                )
            ).all()
            for item, user in targets:
                activity = "Completed" if completed else "InProgress"
                if self._same_as_last(conn, student, source, item, (given, maximum, activity)):
                    continue  # a mastery report repeats unchanged objectives: nothing new
                conn.execute(
                    scores.insert().values(
                        student=student,
                        lti_user=user,
                        lineitem=item,
                        source=source,
                        score_given=given,
                        score_maximum=maximum,
                        # AGS: the learner's progress, and whether the score is final.
                        activity=activity,
                        grading="FullyGraded",
                        timestamp=now.isoformat(timespec="milliseconds"),
                        next_try=int(now.timestamp()),
                    )
                )
                queued += 1
        return queued

    def _same_as_last(
        self,
        conn: sa.Connection,
        student: str,
        source: str,
        item: str,
        score: tuple[float, float, str],
    ) -> bool:
        last = conn.execute(
            sa.select(scores.c.score_given, scores.c.score_maximum, scores.c.activity)
            .where(
                scores.c.student == student, scores.c.source == source, scores.c.lineitem == item
            )
            .order_by(scores.c.id.desc())
            .limit(1)
        ).first()
        return last is not None and tuple(last) == score

    def due(self, now: dt.datetime, limit: int = 50) -> list[ScoreRow]:
        query = (
            sa.select(scores)
            .where(scores.c.delivered.is_(None), scores.c.next_try <= int(now.timestamp()))
            .order_by(scores.c.id)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [ScoreRow(**r._mapping) for r in conn.execute(query)]

    def claim(self, row: ScoreRow, until: int) -> bool:
        """Take the row for one delivery attempt; False when another replica took it first."""
        with self.engine.begin() as conn:
            done = conn.execute(
                scores.update()
                .where(
                    scores.c.id == row.id,
                    scores.c.next_try == row.next_try,
                    scores.c.delivered.is_(None),
                )
                .values(next_try=until)
            )
            return int(done.rowcount) == 1

    def delivered(self, row_id: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                scores.update().where(scores.c.id == row_id).values(delivered=self._stamp())
            )

    def failed(self, row_id: int, error: str, next_try: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                scores.update()
                .where(scores.c.id == row_id)
                .values(attempts=scores.c.attempts + 1, last_error=error[:300], next_try=next_try)
            )

    def undelivered(self) -> list[ScoreRow]:
        query = sa.select(scores).where(scores.c.delivered.is_(None)).order_by(scores.c.id)
        with self.engine.connect() as conn:
            return [ScoreRow(**r._mapping) for r in conn.execute(query)]

    def all_scores(self) -> list[ScoreRow]:
        with self.engine.connect() as conn:
            return [ScoreRow(**r._mapping) for r in conn.execute(sa.select(scores))]
