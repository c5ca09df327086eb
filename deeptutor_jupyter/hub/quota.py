"""Budgets and usage in one SQL database shared by every replica of the service.

SQLite by default, PostgreSQL by URL (``postgresql+psycopg://...``). Admission and accounting are
single ``UPDATE ... WHERE`` statements, so two replicas on one PostgreSQL never admit more than
the budget between them: the row lock makes the second UPDATE re-check its WHERE against the
first one's result.

The daily budget is a cap, not a threshold: a request holds back its prompt (estimated) and the
answer length it is granted, and is admitted only while ``used + held + its hold`` stays within
the limit. The answer granted is what it asked for, cut to what is left of the day; the gateway
sends that number upstream as ``max_tokens``, so concurrent requests cannot spend past the limit
between them. When it ends, the upstream's reported usage replaces the hold. Only counts are
stored: student, model, day, tokens, requests; never text.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from deeptutor_jupyter.hub.settings import Limits

Clock = Callable[[], dt.datetime]

metadata = sa.MetaData()

budget_day = sa.Table(
    "deeptutor_budget_day",
    metadata,
    sa.Column("student", sa.String(255), primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("used", sa.BigInteger, nullable=False, default=0),
    sa.Column("held", sa.BigInteger, nullable=False, default=0),
    # Requests refused today (budget or rate), for the instructor's page.
    sa.Column("refused", sa.Integer, nullable=False, server_default="0"),
)
rate_minute = sa.Table(
    "deeptutor_rate_minute",
    metadata,
    sa.Column("student", sa.String(255), primary_key=True),
    sa.Column("minute", sa.BigInteger, primary_key=True),
    sa.Column("count", sa.Integer, nullable=False, default=0),
)
usage_day = sa.Table(
    "deeptutor_usage_day",
    metadata,
    sa.Column("student", sa.String(255), primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("model", sa.String(255), primary_key=True),
    sa.Column("requests", sa.Integer, nullable=False, default=0),
    sa.Column("prompt_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("completion_tokens", sa.BigInteger, nullable=False, default=0),
)
# Every running request's hold, so a hold left by a process that died (a crash, a killed pod)
# can be given back instead of staying until the day ends: by the same replica when it starts
# again (a new incarnation), by any replica once the dead one's lease has run out.
holds = sa.Table(
    "deeptutor_hold",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("student", sa.String(255), nullable=False),
    sa.Column("day", sa.String(10), nullable=False),
    sa.Column("held", sa.BigInteger, nullable=False),
    sa.Column("prompt", sa.BigInteger, nullable=False),
    sa.Column("replica", sa.String(255), nullable=False, index=True),
    sa.Column("incarnation", sa.String(32), nullable=False),
    sa.Column("started", sa.BigInteger, nullable=False),
)
replicas = sa.Table(
    "deeptutor_replica",
    metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("incarnation", sa.String(32), nullable=False),
    sa.Column("beat", sa.BigInteger, nullable=False),
)
student_limits = sa.Table(
    "deeptutor_student_limits",
    metadata,
    sa.Column("student", sa.String(255), primary_key=True),
    sa.Column("daily_tokens", sa.BigInteger, nullable=True),
    sa.Column("requests_per_minute", sa.Integer, nullable=True),
)


def _bounded(tokens: int) -> int:
    return min(max(0, tokens), 1 << 40)


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class Refusal:
    """Why a request was not admitted, in words for the student's cell."""

    code: str  # "budget_exhausted" or "rate_limited"
    message: str
    retry_after: int | None = None


@dataclass(frozen=True)
class Ticket:
    """An admitted request: what to settle when it ends, and the answer length it may use."""

    student: str
    day: str
    held: int
    answer: int = 0
    id: str = ""  # its row in deeptutor_hold; "" for none

    @property
    def prompt(self) -> int:
        """The prompt estimate admitted with it: what was held beyond the answer."""
        return self.held - self.answer


@dataclass(frozen=True)
class UsageRow:
    student: str
    day: str
    model: str
    requests: int
    prompt_tokens: int
    completion_tokens: int


def make_engine(url: str) -> sa.Engine:
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        # The service uses a few worker threads; SQLite waits for a lock instead of failing.
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    else:
        kwargs["pool_pre_ping"] = True
    engine = sa.create_engine(url, **kwargs)
    if url.startswith("sqlite"):
        _private_file(engine.url.database)
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _private_file(database: str | None) -> None:
    """Create the SQLite file readable by the service's user only, before SQLite opens it.

    Its usage rows name every student; on a one-machine hub (TLJH) the students are local users.
    SQLite gives the -wal and -shm files the database file's permissions.
    """
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    fd = os.open(database, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    os.chmod(database, 0o600)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    # WAL with NORMAL stays consistent after a crash; a power cut may lose the last counts.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


# The hot path (every request's admission and settlement) in the driver's own SQL: one statement
# each, no SQLAlchemy compilation. Both SQLite (3.24+) and PostgreSQL speak ON CONFLICT ... DO
# UPDATE ... WHERE; a row the WHERE leaves alone counts 0 in rowcount on both.
_UNLIMITED = 2**62
_HOLD = """INSERT INTO deeptutor_budget_day (student, day, used, held)
VALUES (:student, :day, 0, :hold)
ON CONFLICT (student, day) DO UPDATE SET held = deeptutor_budget_day.held + excluded.held
WHERE deeptutor_budget_day.used + deeptutor_budget_day.held + excluded.held <= :limit"""
_BUDGET_ROW = (
    """SELECT used, held FROM deeptutor_budget_day WHERE student = :student AND day = :day"""
)
_TAKE_SLOT = """INSERT INTO deeptutor_rate_minute (student, minute, count)
VALUES (:student, :minute, 1)
ON CONFLICT (student, minute) DO UPDATE SET count = deeptutor_rate_minute.count + 1
WHERE deeptutor_rate_minute.count < :limit"""
_GIVE_SLOT_BACK = """UPDATE deeptutor_rate_minute SET count = count - 1
WHERE student = :student AND minute = :minute"""
_SWEEP_SLOTS = "DELETE FROM deeptutor_rate_minute WHERE student = :student AND minute < :before"
_SETTLE_BUDGET = """UPDATE deeptutor_budget_day SET used = used + :used, held = held - :held
WHERE student = :student AND day = :day"""
_COUNT_USAGE = """INSERT INTO deeptutor_usage_day
(student, day, model, requests, prompt_tokens, completion_tokens)
VALUES (:student, :day, :model, 1, :prompt, :completion)
ON CONFLICT (student, day, model) DO UPDATE SET
requests = deeptutor_usage_day.requests + 1,
prompt_tokens = deeptutor_usage_day.prompt_tokens + excluded.prompt_tokens,
completion_tokens = deeptutor_usage_day.completion_tokens + excluded.completion_tokens"""
_COUNT_REFUSAL = """INSERT INTO deeptutor_budget_day (student, day, used, held, refused)
VALUES (:student, :day, 0, 0, 1)
ON CONFLICT (student, day) DO UPDATE SET refused = deeptutor_budget_day.refused + 1"""
_ADD_HOLD = """INSERT INTO deeptutor_hold
(id, student, day, held, prompt, replica, incarnation, started)
VALUES (:id, :student, :day, :held, :prompt, :replica, :incarnation, :started)"""
_DROP_HOLD = "DELETE FROM deeptutor_hold WHERE id = :id"
_NAMED = re.compile(r":(\w+)")
_by_style: dict[tuple[str, str], str] = {}


def run_sql(conn: sa.Connection, sql: str, params: dict[str, Any]) -> int:
    """Run one of the statements above in the driver's parameter style; its rowcount."""
    return int(conn.exec_driver_sql(_style(conn, sql), params).rowcount)


def _style(conn: sa.Connection, sql: str) -> str:
    """A statement above in the driver's parameter style."""
    # sqlite3 takes :name whatever SQLAlchemy's own style is; psycopg takes %(name)s.
    style = "named" if conn.dialect.name == "sqlite" else conn.dialect.paramstyle
    key = (style, sql)
    text = _by_style.get(key)
    if text is None:
        if style == "named":
            text = sql
        elif style in ("pyformat", "format"):
            text = _NAMED.sub(r"%(\1)s", sql.replace("%", "%%"))
        else:  # pragma: no cover - only SQLite and PostgreSQL are documented
            raise RuntimeError(f"unsupported parameter style {style}")
        _by_style[key] = text
    return text


def insert_missing(conn: sa.Connection, table: sa.Table, values: dict[str, Any]) -> None:
    """INSERT the row unless it exists, in the dialect's own words (both speak ON CONFLICT)."""
    dialect = conn.dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        conn.execute(pg_insert(table).values(**values).on_conflict_do_nothing())
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        conn.execute(sqlite_insert(table).values(**values).on_conflict_do_nothing())
    else:  # pragma: no cover - only SQLite and PostgreSQL are documented
        try:
            with conn.begin_nested():
                conn.execute(table.insert().values(**values))
        except sa.exc.IntegrityError:
            pass


class QuotaStore:
    """Admission, settlement and reports over one engine; every method is one short transaction."""

    def __init__(
        self, engine: sa.Engine, clock: Clock = utc_now, replica: str | None = None
    ) -> None:
        self.engine = engine
        self.clock = clock
        # Who holds this process's tokens (hub/lease.py): a name that outlives a restart (the
        # service's host and port), and this process's own incarnation of it.
        self.replica = replica or f"{socket.gethostname()}:{os.getpid()}"
        self.incarnation = uuid.uuid4().hex
        self._swept: dict[str, int] = {}  # student -> the minute their old rows were removed
        self._batch_conn: sa.Connection | None = None
        metadata.create_all(engine)
        add_column(engine, "deeptutor_budget_day", "refused", "INTEGER NOT NULL DEFAULT 0")

    # --- limits -----------------------------------------------------------------------------

    def student_override(self, student: str) -> Limits | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(student_limits).where(student_limits.c.student == student)
            ).first()
        if row is None:
            return None
        return Limits(daily_tokens=row.daily_tokens, requests_per_minute=row.requests_per_minute)

    def set_student_override(self, student: str, limits: Limits | None) -> None:
        """An instructor's per-student limits; None goes back to the group or course default."""
        with self.engine.begin() as conn:
            conn.execute(student_limits.delete().where(student_limits.c.student == student))
            if limits is not None:
                conn.execute(student_limits.insert().values(student=student, **limits.model_dump()))

    def overrides(self) -> dict[str, Limits]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(student_limits)).all()
        return {
            r.student: Limits(
                daily_tokens=r.daily_tokens, requests_per_minute=r.requests_per_minute
            )
            for r in rows
        }

    # --- admission ----------------------------------------------------------------------------

    def admit(self, student: str, limits: Limits, answer: int, prompt: int = 0) -> Ticket | Refusal:
        with self.engine.begin() as conn:
            return self.admit_in(conn, student, limits, answer, prompt)

    def release(self, ticket: Ticket) -> None:
        """Give back the hold of a request the upstream refused or never answered."""
        with self.engine.begin() as conn:
            self.release_in(conn, ticket)

    def settle(self, ticket: Ticket, model: str, prompt: int, completion: int) -> None:
        """Replace the request's hold by what the upstream said it used; record the usage."""
        with self.engine.begin() as conn:
            self.settle_in(conn, ticket, model, prompt, completion)

    def run_batch(self, ops: list[Callable[[sa.Connection], Any]]) -> list[Any]:
        """Several operations in one transaction (hub/batch.py orders them so that replicas
        lock rows in the same order). A failed batch is retried one operation at a time, so
        an operation that fails (whatever the error) fails alone: the others' admissions,
        settlements and give-backs still commit."""
        try:
            conn = self._batch_connection()
            with conn.begin():
                return [op(conn) for op in ops]
        except Exception:
            self._drop_batch_connection()
            results: list[Any] = []
            for op in ops:
                try:
                    with self.engine.begin() as conn:
                        results.append(op(conn))
                except Exception as exc:
                    results.append(exc)
            return results

    def _batch_connection(self) -> sa.Connection:
        """One connection kept for the batches (they run one at a time, hub/batch.py): a
        checkout from the pool per batch cost more than the batch's statements."""
        if self._batch_conn is None or self._batch_conn.closed:
            self._batch_conn = self.engine.connect()
        return self._batch_conn

    def _drop_batch_connection(self) -> None:
        if self._batch_conn is not None:
            with contextlib.suppress(sa.exc.SQLAlchemyError):
                self._batch_conn.close()
            self._batch_conn = None

    def admit_in(
        self, conn: sa.Connection, student: str, limits: Limits, answer: int, prompt: int = 0
    ) -> Ticket | Refusal:
        """Admit a request whose prompt is about ``prompt`` tokens and which asks for answers
        of up to ``answer`` tokens; the ticket says how many answer tokens it was granted."""
        now = self.clock()
        day = now.strftime("%Y-%m-%d")
        minute = int(now.timestamp() // 60)
        per_minute = limits.requests_per_minute
        if per_minute is not None and not self._take_minute_slot(conn, student, minute, per_minute):
            run_sql(conn, _COUNT_REFUSAL, {"student": student, "day": day})
            return Refusal(
                "rate_limited",
                f"You are sending questions faster than your course allows "
                f"({per_minute} a minute). Wait a minute and try again.",
                retry_after=60 - now.second,
            )
        ticket = self._hold(conn, student, day, limits.daily_tokens, max(0, prompt), answer)
        if ticket is not None:
            return self._record_hold(conn, ticket, max(0, prompt), now)
        if per_minute is not None:
            # A refused request should not also cost a slot of the minute.
            run_sql(conn, _GIVE_SLOT_BACK, {"student": student, "minute": minute})
        run_sql(conn, _COUNT_REFUSAL, {"student": student, "day": day})
        return Refusal("budget_exhausted", budget_message())

    def _hold(
        self,
        conn: sa.Connection,
        student: str,
        day: str,
        daily: int | None,
        prompt: int,
        answer: int,
    ) -> Ticket | None:
        params: dict[str, Any] = {"student": student, "day": day}
        if daily is None:
            hold = prompt + answer
            run_sql(conn, _HOLD, {**params, "hold": hold, "limit": _UNLIMITED})
            return Ticket(student, day, hold, answer)
        # Read what is left, then hold within it. The UPDATE re-checks its WHERE against a
        # concurrent replica's committed hold; losing that race once reads again.
        for _ in range(2):
            row = conn.exec_driver_sql(_style(conn, _BUDGET_ROW), params).first()
            left = daily - (int(row[0]) + int(row[1]) if row is not None else 0)
            granted = min(answer, left - prompt)
            if granted < 1:
                return None
            hold = prompt + granted
            if run_sql(conn, _HOLD, {**params, "hold": hold, "limit": daily}) == 1:
                return Ticket(student, day, hold, granted)
        return None

    def _record_hold(
        self, conn: sa.Connection, ticket: Ticket, prompt: int, now: dt.datetime
    ) -> Ticket:
        hold_id = uuid.uuid4().hex
        row = {
            "id": hold_id,
            "student": ticket.student,
            "day": ticket.day,
            "held": ticket.held,
            "prompt": min(prompt, ticket.held),
            "replica": self.replica,
            "incarnation": self.incarnation,
            "started": int(now.timestamp()),
        }
        run_sql(conn, _ADD_HOLD, row)
        return Ticket(ticket.student, ticket.day, ticket.held, ticket.answer, hold_id)

    def _drop_hold(self, conn: sa.Connection, ticket: Ticket) -> int:
        """The hold still to give back: none when a sweep already gave it back (hub/lease.py)."""
        if not ticket.id:
            return ticket.held
        return ticket.held if run_sql(conn, _DROP_HOLD, {"id": ticket.id}) == 1 else 0

    def _take_minute_slot(
        self, conn: sa.Connection, student: str, minute: int, per_minute: int
    ) -> bool:
        """Whether the student may send one more request this minute (it is then counted)."""
        if per_minute <= 0:
            return False
        params = {"student": student, "minute": minute, "limit": per_minute}
        taken = run_sql(conn, _TAKE_SLOT, params) == 1
        if self._swept.get(student) != minute:
            # Only the student's own old rows, once a minute: touching others' rows would
            # break the lock order of hub/batch.py.
            run_sql(conn, _SWEEP_SLOTS, {"student": student, "before": minute - 1})
            self._swept[student] = minute
        return taken

    def release_in(self, conn: sa.Connection, ticket: Ticket) -> None:
        held = self._drop_hold(conn, ticket)
        params = {"student": ticket.student, "day": ticket.day, "used": 0, "held": held}
        run_sql(conn, _SETTLE_BUDGET, params)

    def settle_in(
        self, conn: sa.Connection, ticket: Ticket, model: str, prompt: int, completion: int
    ) -> None:
        # An upstream's count is taken within sane bounds: a number the database cannot hold
        # would fail the settlement and leave the hold in place for the rest of the day.
        prompt, completion = _bounded(prompt), _bounded(completion)
        held = self._drop_hold(conn, ticket)
        budget = {"student": ticket.student, "day": ticket.day, "held": held}
        run_sql(conn, _SETTLE_BUDGET, {**budget, "used": prompt + completion})
        usage = {"student": ticket.student, "day": ticket.day, "model": model}
        run_sql(conn, _COUNT_USAGE, {**usage, "prompt": prompt, "completion": completion})

    # --- reports ------------------------------------------------------------------------------

    def used_today(self, student: str) -> int:
        return self.today(student)[0]

    def today(self, student: str) -> tuple[int, int]:
        """(tokens used today, tokens held by the student's running requests)."""
        day = self.clock().strftime("%Y-%m-%d")
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(budget_day.c.used, budget_day.c.held).where(
                    budget_day.c.student == student, budget_day.c.day == day
                )
            ).first()
        return (int(row.used), int(row.held)) if row is not None else (0, 0)

    def today_all(self) -> list[DayRow]:
        """Every student's day so far: used, held by running requests, refused."""
        day = self.clock().strftime("%Y-%m-%d")
        query = sa.select(budget_day).where(budget_day.c.day == day).order_by(budget_day.c.student)
        with self.engine.connect() as conn:
            return [
                DayRow(r.student, int(r.used), int(r.held), int(r.refused))
                for r in conn.execute(query)
            ]

    def reset_day(self, student: str) -> None:
        """An instructor gives a student today's budget back (running requests keep their holds)."""
        day = self.clock().strftime("%Y-%m-%d")
        with self.engine.begin() as conn:
            conn.execute(
                budget_day.update()
                .where(budget_day.c.student == student, budget_day.c.day == day)
                .values(used=0, refused=0)
            )

    def usage(self, student: str | None = None, days: int = 31) -> list[UsageRow]:
        since = (self.clock() - dt.timedelta(days=days)).strftime("%Y-%m-%d")
        query = sa.select(usage_day).where(usage_day.c.day >= since)
        if student is not None:
            query = query.where(usage_day.c.student == student)
        query = query.order_by(usage_day.c.day.desc(), usage_day.c.student, usage_day.c.model)
        with self.engine.connect() as conn:
            return [UsageRow(**row._asdict()) for row in conn.execute(query)]


@dataclass(frozen=True)
class DayRow:
    student: str
    used: int
    held: int
    refused: int


def add_column(engine: sa.Engine, table: str, column: str, definition: str) -> None:
    """A database made by an earlier version gets a column added since."""
    if column not in {c["name"] for c in sa.inspect(engine).get_columns(table)}:
        with engine.begin() as conn:
            conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {column} {definition}"))


def budget_message() -> str:
    """The refusal a student reads: the budget resets at midnight UTC, the start of a new day."""
    return (
        "You have used today's tutor budget; it resets at 00:00 UTC. Ask your instructor for more."
    )
