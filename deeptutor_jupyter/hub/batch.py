"""Group commit: the quota operations that arrive together share one database transaction.

When a class starts at the same minute, a hundred admissions arrive within milliseconds. Run one
by one, each would wait for the commits of all before it; here, whatever queued while the
previous transaction ran goes into the next one. Within a batch, operations are ordered by
student, admissions before settlements, so that two replicas lock the same rows in the same
order and never deadlock each other on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import sqlalchemy as sa

from deeptutor_jupyter.hub.quota import QuotaStore, Refusal, Ticket
from deeptutor_jupyter.hub.settings import Limits

_Op = Callable[[sa.Connection], Any]


class GroupCommit:
    def __init__(self, quota: QuotaStore, executor: Executor) -> None:
        self.quota = quota
        self.executor = executor
        self._pending: list[tuple[tuple[str, int], _Op, asyncio.Future[Any]]] = []
        self._running = False

    async def admit(
        self, student: str, limits: Limits, answer: int, prompt: int = 0
    ) -> Ticket | Refusal:
        op: _Op = lambda conn: self.quota.admit_in(conn, student, limits, answer, prompt)  # noqa: E731
        result: Ticket | Refusal = await self._submit((student, 0), op)
        return result

    async def settle(self, ticket: Ticket, model: str, prompt: int, completion: int) -> None:
        op: _Op = lambda conn: self.quota.settle_in(conn, ticket, model, prompt, completion)  # noqa: E731
        await self._submit((ticket.student, 1), op)

    async def release(self, ticket: Ticket) -> None:
        await self._submit((ticket.student, 1), lambda conn: self.quota.release_in(conn, ticket))

    async def _submit(self, order: tuple[str, int], op: _Op) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((order, op, future))
        self._kick()
        result = await future
        if isinstance(result, BaseException):
            raise result
        return result

    def _kick(self) -> None:
        if self._running or not self._pending:
            return
        self._running = True
        loop = asyncio.get_running_loop()
        # Every batch runs on a worker thread, SQLite's too: on the loop it saved about 0.8 ms
        # a request, but a database lock held by anyone (a backup, the instructor page) then
        # froze every student's open stream for as long as it lasted.
        batch, self._pending = sorted(self._pending, key=lambda item: item[0]), []
        ops = [op for _, op, _ in batch]
        job = loop.run_in_executor(self.executor, self.quota.run_batch, ops)
        job.add_done_callback(lambda done: self._finish(batch, done))

    def _finish(self, batch: list[tuple[Any, _Op, asyncio.Future[Any]]], done: Any) -> None:
        self._running = False
        error = done.exception()
        results = [error] * len(batch) if error is not None else done.result()
        for (_, _, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)
        self._kick()
