"""``TutorHost``: one session run for a host process; a turn is run until it ends or pauses.

A paused turn waits in this process (its owner) on a pending interaction, like a cell's turn:
the host answers it through ``TutorSession.submit``/``submit_quiz``, the one door of every
surface, and waits again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.errors import DeepTutorError

if TYPE_CHECKING:
    from deeptutor_jupyter.runtime.events import Event
    from deeptutor_jupyter.runtime.orchestrator import Turn
    from deeptutor_jupyter.runtime.session import TutorSession
    from deeptutor_jupyter.store.db import PendingRow


class HostError(DeepTutorError):
    code = "host"


@dataclass
class Settled:
    """Where a turn stands for the host: ended (``answer``) or waiting on ``waiting``."""

    turn: Turn
    answer: str = ""
    error: str = ""
    waiting: PendingRow | None = None


class TutorHost:
    def __init__(self, session: TutorSession | None = None, *, surface: str = "mcp") -> None:
        if session is None:
            from deeptutor_jupyter.config import resolve_settings
            from deeptutor_jupyter.runtime.session import TutorSession

            session = TutorSession(
                f"{surface}-host", resolve=lambda f: resolve_settings(flags=f), surface=surface
            )
        self.session = session
        self.turns: dict[str, Turn] = {}
        # Every event of the turns the host waits on, as they come (an ACP host streams them).
        self.on_event: Callable[[Event], None] | None = None

    def _resolved(self) -> Any:
        resolved = self.session.resolve({})
        if not resolved.ready:
            raise HostError("The tutor has no model yet: " + "; ".join(resolved.missing()) + ".")
        return resolved

    async def ask(self, question: str, kbs: list[str] | None = None, new: bool = False) -> Settled:
        from deeptutor_jupyter.runtime.plan import PlanError
        from deeptutor_jupyter.runtime.session import AskOptions

        options = AskOptions(
            new=new, kbs=list(kbs or []), place={"notebook": self.session.notebook}
        )
        try:
            turn = self.session.ask(question, self._resolved(), options)
        except PlanError as exc:  # a question over the limit, an unknown knowledge base
            raise HostError(str(exc)) from None
        self.turns[turn.turn_id] = turn
        return await self.settle(turn, after_seq=0)

    async def settle(self, turn: Turn, after_seq: int, timeout: float = 3600) -> Settled:
        """Wait until the turn ends or waits on a question or quiz of its own; its events after
        ``after_seq`` go to ``on_event``."""
        from deeptutor_jupyter.agent.events import Done, QuizRequired, UserInputRequired

        assert turn.task is not None
        changed = asyncio.Event()

        def on_event(event: Any) -> None:
            if self.on_event is not None:
                self.on_event(event)
            if isinstance(event.body, Done | UserInputRequired | QuizRequired):
                changed.set()

        turn.log.subscribe(on_event, after_seq=after_seq)
        try:
            while True:
                if turn.task.done():
                    return self._ended(turn)
                waiting = self._waiting(turn)
                if waiting is not None:
                    return Settled(turn, waiting=waiting)
                changed.clear()
                await asyncio.wait_for(changed.wait(), timeout)
        finally:
            turn.log.unsubscribe(on_event)

    def _waiting(self, turn: Turn) -> PendingRow | None:
        rows = self.session.pending(session_id=turn.ctx.session_id)
        return next((r for r in rows if r.turn_id == turn.turn_id), None)

    def _ended(self, turn: Turn) -> Settled:
        from deeptutor_jupyter.agent.events import ErrorEvent

        self.turns.pop(turn.turn_id, None)
        events = self.session.events_of(turn)  # a finished turn's are in the store
        errors = [e.body for e in events if isinstance(e.body, ErrorEvent)]
        error = f"{errors[-1].message} {errors[-1].hint}".strip() if errors else ""
        return Settled(turn, answer=turn.answer, error=error)

    async def answer(
        self,
        request_id: str,
        selections: list[str] | None = None,
        text: str = "",
        cancelled: bool = False,
    ) -> Settled | None:
        """Answer a waiting question; the turn's next stop when it runs here, else None."""
        row = self.row(request_id)
        seen = self._last_seq(row)
        self.session.submit(row.session_id, request_id, selections, text, cancelled)
        return await self._after(row, seen)

    async def answer_quiz(self, quiz_id: str, answers: dict[str, Any]) -> Settled | None:
        row = self.row(quiz_id)
        seen = self._last_seq(row)
        await self.session.submit_quiz(row.session_id, quiz_id, answers)
        return await self._after(row, seen)

    def _last_seq(self, row: PendingRow) -> int:
        turn = self.turns.get(row.turn_id)
        return turn.log.last_seq if turn is not None else 0

    def row(self, request_id: str) -> PendingRow:
        """The waiting question or quiz with this id, from any conversation."""
        self.session.open(self.session.resolve({}))
        for row in self.session.pending(all_sessions=True):
            if row.request_id == request_id:
                return row
        raise HostError(f"Nothing waits with id {request_id!r}; see the pending tool.")

    async def _after(self, row: PendingRow, after_seq: int) -> Settled | None:
        turn = self.turns.get(row.turn_id)
        return await self.settle(turn, after_seq) if turn is not None else None

    def pending(self) -> list[PendingRow]:
        self.session.open(self.session.resolve({}))
        return self.session.pending(all_sessions=True)

    async def search(self, kb: str, query: str) -> str:
        from deeptutor_jupyter.knowledge.tools import SearchKnowledgeArgs, SearchKnowledgeTool
        from deeptutor_jupyter.tools.base import ToolContext, ToolDeps

        home = self.session.resolve({}).settings.home
        ctx = ToolContext("host", "host-search", Path.cwd(), ToolDeps(home=home, kbs=[kb]))
        result = await SearchKnowledgeTool().run(SearchKnowledgeArgs(query=query), ctx)
        if result.is_error:
            raise HostError(result.content)
        return result.content

    async def aclose(self) -> None:
        for turn in list(self.turns.values()):
            turn.cancel("The host is closing.")
        for model in self.session.models.values():
            await model.aclose()
        if self.session.mcp is not None:
            await self.session.mcp.aclose()
        self.session.close()
