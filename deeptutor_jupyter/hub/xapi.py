"""Learning records: xAPI statements to the learning record store (LRS) the course names.

The course service writes a statement for what it sees of each student's learning:

- ``asked``: a question to the tutor (a request that starts a turn: ``is_question``), of the
  activity ``hint`` when the course's policy gives hints only, else ``chat``;
- ``answered`` and ``completed``: a course notebook's graded quiz (``v1/scores``);
- ``answered``: a spaced review of a course objective (``v1/scores``, kind ``review``);
- ``progressed``: the mastery of a course objective (``v1/mastery``).

**Privacy.** A statement carries the student's hub name (as an account of the hub), the
activity's id, numbers and times. Free text (the question asked) is left out unless the course
sets ``xapi.free_text`` (for research with the students' consent).

**Delivery.** Statements are rows of ``deeptutor_xapi`` from the moment they are made; the
service's loop posts them in batches (``POST statements``, xAPI 1.0.3, HTTP basic auth) and
marks them sent. A failed batch is retried with the scores' backoff (hub/lti/outbox.py); every
statement has its own id, so a batch the LRS stored but whose answer was lost is stored once
(an LRS answers a repeated id with the same content by 204).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import sqlalchemy as sa
from pydantic import SecretStr

from deeptutor_jupyter.hub.lti.outbox import backoff
from deeptutor_jupyter.hub.quota import Clock, metadata, utc_now
from deeptutor_jupyter.hub.settings import XAPIConfig

log = logging.getLogger("deeptutor.hub")
VERBS = {
    "asked": "http://adlnet.gov/expapi/verbs/asked",
    "answered": "http://adlnet.gov/expapi/verbs/answered",
    "completed": "http://adlnet.gov/expapi/verbs/completed",
    "progressed": "http://adlnet.gov/expapi/verbs/progressed",
}
MAX_TEXT = 2000
IDLE_SECONDS = 10

statements = sa.Table(
    "deeptutor_xapi",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_try", sa.BigInteger, nullable=False, index=True),
    sa.Column("last_error", sa.String(300), nullable=False, server_default=""),
    sa.Column("sent", sa.String(32), nullable=True),
)


@dataclass
class Statements:
    config: XAPIConfig
    engine: sa.Engine
    password: SecretStr | None
    clock: Clock = utc_now

    def __post_init__(self) -> None:
        metadata.create_all(self.engine, tables=[statements])
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    # --- making statements ---------------------------------------------------------------------

    def statement(
        self,
        student: str,
        verb: str,
        activity: str,
        *,
        result: dict[str, Any] | None = None,
        text: str | None = None,
    ) -> dict[str, Any]:
        home = self.config.homepage.rstrip("/")
        body: dict[str, Any] = {
            "id": str(uuid.uuid4()),
            "actor": {"objectType": "Agent", "account": {"homePage": home, "name": student}},
            "verb": {"id": VERBS[verb], "display": {"en-US": verb}},
            "object": {"objectType": "Activity", "id": f"{home}/tutor/{quote(activity, safe='/')}"},
            "timestamp": self.clock().isoformat(timespec="milliseconds"),
        }
        if result:
            body["result"] = result
        if text and self.config.free_text:
            body.setdefault("result", {})["response"] = text[:MAX_TEXT]
        return body

    def record(self, bodies: list[dict[str, Any]]) -> None:
        now = int(self.clock().timestamp())
        with self.engine.begin() as conn:
            for body in bodies:
                conn.execute(
                    statements.insert().values(id=body["id"], body=json.dumps(body), next_try=now)
                )
        self.kick()

    def asked(self, student: str, text: str, hint: bool = False) -> None:
        """A question to the tutor; under a ``hints`` policy (docs/policy.md) it asks for a hint."""
        self.record([self.statement(student, "asked", "hint" if hint else "chat", text=text)])

    def quiz(self, student: str, notebook: str, score: float, maximum: float) -> None:
        result = {
            "score": {"raw": score, "min": 0, "max": maximum, "scaled": round(score / maximum, 4)},
            "completion": True,
        }
        activity = f"notebook/{notebook}"
        self.record(
            [
                self.statement(student, "answered", activity, result=result),
                self.statement(student, "completed", activity, result={"completion": True}),
            ]
        )

    def review(self, student: str, objective: str, score: float, maximum: float) -> None:
        result = {
            "score": {"raw": score, "min": 0, "max": maximum, "scaled": round(score / maximum, 4)}
        }
        self.record([self.statement(student, "answered", f"review/{objective}", result=result)])

    def progressed(self, student: str, values: dict[str, tuple[float, int]]) -> None:
        self.record(
            [
                self.statement(
                    student,
                    "progressed",
                    f"objective/{objective}",
                    result={"score": {"scaled": round(p, 4)}, "extensions": _answers(n)},
                )
                for objective, (p, n) in sorted(values.items())
            ]
        )

    # --- delivery ------------------------------------------------------------------------------

    def due(self, now: dt.datetime) -> list[tuple[str, str, int]]:
        query = (
            sa.select(statements.c.id, statements.c.body, statements.c.attempts)
            .where(statements.c.sent.is_(None), statements.c.next_try <= int(now.timestamp()))
            .order_by(statements.c.next_try, statements.c.id)
            .limit(self.config.batch)
        )
        with self.engine.connect() as conn:
            return [(str(r.id), str(r.body), int(r.attempts)) for r in conn.execute(query)]

    def mark(self, ids: list[str], error: str | None, next_try: int) -> None:
        with self.engine.begin() as conn:
            where = statements.c.id.in_(ids)
            if error is None:
                stamp = self.clock().isoformat(timespec="seconds")
                conn.execute(statements.update().where(where).values(sent=stamp))
            else:
                conn.execute(
                    statements.update()
                    .where(where)
                    .values(
                        attempts=statements.c.attempts + 1,
                        last_error=error[:300],
                        next_try=next_try,
                    )
                )

    def waiting(self) -> int:
        return self.status()[0]

    def status(self) -> tuple[int, str]:
        """How many statements wait for the LRS, and the last error of one that failed."""
        unsent = statements.c.sent.is_(None)
        with self.engine.connect() as conn:
            count = int(conn.execute(sa.select(sa.func.count()).where(unsent)).scalar_one())
            error = conn.execute(
                sa.select(statements.c.last_error)
                .where(unsent, statements.c.attempts > 0)
                .order_by(statements.c.next_try.desc())
                .limit(1)
            ).scalar()
        return count, str(error or "")

    async def send_due(self, session: aiohttp.ClientSession, now: dt.datetime | None = None) -> int:
        """Post one batch of due statements; how many the LRS took (0 on failure)."""
        now = now or self.clock()
        loop = asyncio.get_running_loop()
        batch = await loop.run_in_executor(None, self.due, now)
        if not batch:
            return 0
        ids = [row[0] for row in batch]
        error = await self._post(session, [json.loads(row[1]) for row in batch])
        wait = backoff(max(row[2] for row in batch) + 1)
        await loop.run_in_executor(None, self.mark, ids, error, int(now.timestamp()) + wait)
        if error is not None:
            log.warning(
                "%d learning records not sent (%s); next try in %d s", len(ids), error, wait
            )
            return 0
        return len(ids)

    async def _post(
        self, session: aiohttp.ClientSession, bodies: list[dict[str, Any]]
    ) -> str | None:
        url = self.config.endpoint.rstrip("/") + "/statements"
        password = self.password.get_secret_value() if self.password is not None else ""
        pair = base64.b64encode(f"{self.config.username}:{password}".encode()).decode()
        headers = {
            "X-Experience-API-Version": "1.0.3",
            "Content-Type": "application/json",
            "Authorization": f"Basic {pair}",
        }
        try:
            async with session.post(
                url,
                json=bodies,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=30),
            ) as response:
                if response.status in (200, 204):
                    return None
                return f"HTTP {response.status} from the LRS"
        except (aiohttp.ClientError, TimeoutError) as exc:
            return f"the LRS could not be reached ({type(exc).__name__})"

    def kick(self) -> None:
        """Wake the delivery loop; statements are recorded on worker threads, hence threadsafe."""
        if self._wake is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    def start(self, session: aiohttp.ClientSession) -> None:
        """The delivery loop on the running event loop (kept, so it is not collected)."""
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.ensure_future(self._run(session))

    async def _run(self, session: aiohttp.ClientSession) -> None:
        assert self._wake is not None
        while True:
            try:
                while await self.send_due(session):
                    pass  # a full batch went: there may be more
            except Exception as exc:  # a database hiccup must not end the deliveries
                log.warning("learning records: %s", type(exc).__name__)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), IDLE_SECONDS)
            self._wake.clear()


def _answers(n: int) -> dict[str, int]:
    return {"https://deeptutor.dev/xapi/graded-answers": n}


def is_question(raw: dict[str, Any]) -> str | None:
    """The student's question when a chat request starts a tutor's turn, else None.

    A turn's first request ends with the student's message and offers the tutor's tools; the
    loop's later requests end with a tool result, and the kernel's background requests (memory
    consolidation, docs/memory.md) offer no tools.
    """
    messages = raw.get("messages")
    if not isinstance(messages, list) or not messages or not raw.get("tools"):
        return None
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        return None
    content = last.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""
