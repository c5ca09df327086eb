"""How a turn runs: ``Orchestrator.start_turn`` runs it as a task on the event loop.

Every surface reaches it through ``TutorSession`` (runtime/session.py), so a turn behaves the
same wherever it was started. The task always ends with a ``done`` event, whatever happened inside
it, and a failure is an ``error`` event a view can render, never a silently dropped exception.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from deeptutor_jupyter.agent.events import (
    Content,
    Done,
    ErrorEvent,
    Notice,
    Sources,
    ToolCallFinished,
    ToolCallStarted,
    TurnEvent,
    TurnStarted,
)
from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator
from deeptutor_jupyter.interaction.quiz import MakeQuizTool, model_completer, without_quiz_answers
from deeptutor_jupyter.interaction.schema import AskUserArgs, AskUserTool
from deeptutor_jupyter.providers.base import ChatModel, Message, ProviderError, ToolCall
from deeptutor_jupyter.redact import scrub, scrub_text, usable
from deeptutor_jupyter.runtime.context import TurnContext
from deeptutor_jupyter.runtime.disk_full import disk_full_error
from deeptutor_jupyter.runtime.events import EventLog
from deeptutor_jupyter.runtime.saved_turn import STATE_VERSION, ModelCompat, SavedTurn
from deeptutor_jupyter.store.db import DiskFullError, Store
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolDeps, ToolResult
from deeptutor_jupyter.tools.deferred import LoadToolsArgs, LoadToolsTool, deferred_manifest
from deeptutor_jupyter.tools.registry import ToolRegistry, default_registry

SYSTEM_PROMPT = (
    "You are DeepTutor, a patient tutor working inside the learner's Jupyter notebook. "
    "Explain ideas step by step, check understanding, and prefer hints and questions over "
    "handing out full solutions when the learner is practising. Write Markdown; write math in "
    "LaTeX between $...$ or $$...$$. Use a tool when it makes the answer more reliable."
)

STOPPED_NOTE = "[The learner stopped this answer before it was finished.]"
WAITING_FOR_PREVIOUS = (
    "Waiting for the tutor's previous answer in this conversation to finish (or Stop it)."
)
__all__ = ["STATE_VERSION", "Orchestrator", "SavedTurn", "Turn"]

Resume = tuple[Any, ToolResult]  # (LoopState, the result of the call the turn waited on)


@dataclass
class Turn:
    ctx: TurnContext
    log: EventLog
    task: asyncio.Task[None] | None = None
    status: str = "running"
    answer: str = ""
    cancel_reason: str = ""
    messages: list[Message] = field(default_factory=list)  # what this turn added to the history
    deps: ToolDeps = field(default_factory=ToolDeps)  # what the turn's tools may use
    started: float = field(default_factory=time.monotonic)
    interactive: bool = True  # False: no surface can show a form; ask_user degrades
    owner: str | None = None  # the process running it (see interaction/owners.py)
    # Saved states of questions this turn asked; dropped once it checkpoints again or ends.
    open_states: list[str] = field(default_factory=list)
    trace: Any = None  # the L1 trace record, once the turn is done
    # The conversation's turn before this one: this one starts when it has ended, so the
    # history it reads is complete and two answers never interleave in one conversation.
    previous: asyncio.Task[None] | None = None
    # A resumed turn's first event: the answer it was saved waiting for (the kind's event).
    resolved: TurnEvent | None = None
    # Why the store stopped taking this turn (a full disk): the turn ends as failed.
    disk_full: str | None = None
    question_saved: bool = False

    @property
    def turn_id(self) -> str:
        return self.ctx.turn_id

    def __repr__(self) -> str:
        # Short: ``await wait_for_turns()`` shows the turns, and IPython keeps each shown value
        # in ``Out``; the dataclass repr (every event, the context) was ~140 kB a cell.
        answer = self.answer if len(self.answer) <= 60 else self.answer[:59] + "…"
        return f"Turn({self.turn_id!r}, status={self.status!r}, answer={answer!r})"

    def cancel(self, reason: str = "") -> None:
        if self.task is not None and not self.task.done():
            self.cancel_reason = reason
            self.task.cancel()


class Orchestrator:
    def __init__(
        self,
        store: Store | None,
        registry: ToolRegistry | None = None,
        coordinator: InteractionCoordinator | None = None,
    ) -> None:
        self.store = store
        self.registry = registry or default_registry()
        for tool in (AskUserTool(), LoadToolsTool(), MakeQuizTool()):
            if self.registry.get(tool.name) is None:
                self.registry.register(tool)
        # Without a coordinator (no widget frontend) ask_user runs its degraded result.
        self.coordinator = coordinator
        # Ends a full disk kept from the store (turn id -> status, error): written once it can.
        self.unsaved_ends: dict[str, tuple[str, str | None]] = {}
        self.running: dict[str, Turn] = {}  # strong references: the loop only keeps weak ones
        self._latest: dict[str, asyncio.Task[None]] = {}  # session id -> its newest turn

    def start_turn(
        self,
        ctx: TurnContext,
        model: ChatModel,
        log: EventLog | None = None,
        deps: ToolDeps | None = None,
        *,
        interactive: bool = True,
        owner: str | None = None,
    ) -> Turn:
        turn = Turn(ctx, log or EventLog(ctx.turn_id, self.store), deps=deps or ToolDeps())
        turn.interactive, turn.owner = interactive, owner
        return self._start(turn, model, None)

    def resume_turn(
        self,
        saved: SavedTurn,
        outcome: ToolResult,
        model: ChatModel,
        log: EventLog | None = None,
        deps: ToolDeps | None = None,
        *,
        resumed_from: str = "",
        owner: str | None = None,
        resolved: TurnEvent | None = None,
    ) -> Turn:
        """Continue, in this process, a turn saved while it waited on a deferred call.

        Its events continue the saved ``seq``; the saved state of ``resumed_from`` is dropped
        only once this turn checkpoints again (another pause) or ends, so a crash in between
        leaves the call answerable again, never a lost answer. ``resolved`` is the event the
        live turn would have emitted for the answer (the kind's); it comes first.
        """
        from deeptutor_jupyter.agent.loop import LoopState

        state = LoopState.from_json(saved.loop)
        ctx = saved.context.model_copy(update={"history": state.base[:-1]})
        model.compat.stream_options = saved.compat.stream_options
        model.compat.native_tools = saved.compat.native_tools
        log = log or EventLog(ctx.turn_id, self.store)
        if self.store is not None and not log.events:
            # The seq goes on from the saved events whoever built the log: a seq that started
            # over would collide with (and once overwrote) the events before the pause.
            log.start_seq = max(log.start_seq, self.store.last_seq(ctx.turn_id))
        turn = Turn(ctx, log, deps=deps or ToolDeps(), owner=owner)
        if resumed_from:
            turn.open_states.append(resumed_from)
        turn.resolved = resolved
        return self._start(turn, model, (state, outcome))

    def _start(self, turn: Turn, model: ChatModel, resume: Resume | None) -> Turn:
        ctx = turn.ctx
        turn.log.secrets = list(turn.deps.secrets)
        turn.log.on_full = lambda why: self._disk_full(turn, why)
        turn.previous = self._latest.get(ctx.session_id)
        task = asyncio.get_running_loop().create_task(self._run(turn, model, resume))
        self._latest[ctx.session_id] = task
        turn.task = task
        self.running[ctx.turn_id] = turn
        task.add_done_callback(lambda t: self._finished(turn, t))
        return turn

    def _finished(self, turn: Turn, task: asyncio.Task[None]) -> None:
        self.running.pop(turn.turn_id, None)
        turn.previous = None
        if self._latest.get(turn.ctx.session_id) is task:
            del self._latest[turn.ctx.session_id]
        if task.cancelled():  # cancelled before _run began (two turns queued in one cell)
            turn.status = "cancelled"
            turn.log.emit(Notice(text=turn.cancel_reason or "Stopped."))
            turn.log.emit(Done(status="cancelled", answer="", rounds=0, usage={}, elapsed=0.0))
            return
        exc = task.exception()
        if exc is not None:  # a bug in _run itself: still say so in the view
            turn.status = "error"
            turn.log.emit(ErrorEvent(kind="internal", message=f"{type(exc).__name__}: {exc}"))
            turn.log.emit(Done(status="error", answer=""))

    async def _run(self, turn: Turn, model: ChatModel, resume: Resume | None) -> None:
        ctx, log = turn.ctx, turn.log
        log.emit(
            TurnStarted(
                session_id=ctx.session_id,
                question=ctx.question,
                model=ctx.profile.label,
                capability=ctx.capability,
                resumed=resume is not None,
                kbs=[str(k) for k in ctx.metadata.get("kbs") or []],
                replaces=ctx.metadata.get("replaces"),
            )
        )
        self._record_start(turn)
        question: Message = {"role": "user", "content": self._with_context(turn, resume)}
        added: list[Message] = []
        rounds = 0
        usage: dict[str, int] = {}
        error: str | None = None
        try:
            result = await self._chat(turn, model, question, resume)
            secrets = usable(turn.deps.secrets)
            # An endpoint may echo the key: the answer, as kept and as remembered, is scrubbed.
            turn.answer = scrub_text(result.answer, secrets)
            added, rounds = scrub(result.messages, secrets), result.rounds
            usage = {
                "prompt_tokens": result.usage.prompt_tokens,
                "completion_tokens": result.usage.completion_tokens,
                "total_tokens": result.usage.total_tokens,
            }
            turn.status = "done"
            if result.stopped_by == "tool":
                log.emit(Notice(text="The question was cancelled; the turn stops here."))
            if result.stopped_by == "empty":
                log.emit(
                    ErrorEvent(
                        kind="empty",
                        message="The model returned an empty answer twice.",
                        hint="Ask again, or try another model with --model.",
                    )
                )
        except asyncio.CancelledError:
            if (task := asyncio.current_task()) is not None:
                task.uncancel()
            turn.answer = _streamed_text(log)
            if turn.disk_full is not None:
                turn.status, error = "error", turn.disk_full
                log.emit(disk_full_error(log, turn.question_saved, turn.disk_full))
            else:
                turn.status = "cancelled"
                stopped = f"{turn.answer}\n\n{STOPPED_NOTE}".strip()
                added = [{"role": "assistant", "content": stopped}]
                log.emit(Notice(text=turn.cancel_reason or "Stopped."))
        except ProviderError as exc:
            turn.status, error = "error", exc.message
            log.emit(
                ErrorEvent(kind=exc.kind, message=exc.message, hint=exc.hint, status=exc.status)
            )
        except Exception as exc:
            turn.status, error = "error", f"{type(exc).__name__}: {exc}"
            log.emit(
                ErrorEvent(
                    kind="internal",
                    message=f"The tutor hit an internal error: {type(exc).__name__}: {exc}",
                    hint="This is a bug in deeptutor-jupyter; the details are in the turn's "
                    "events.",
                    detail=traceback.format_exc(limit=8),
                )
            )
        if hits := _hits(log):
            log.emit(Sources(hits=hits))
        if turn.status != "error":
            kept = scrub([question, *added], usable(turn.deps.secrets))
            self._record_messages(turn, kept)
        if turn.disk_full is not None and turn.status != "error":
            # The disk filled as the answer ended: it is not kept whole, so the turn failed.
            turn.status, error = "error", turn.disk_full
            log.emit(disk_full_error(log, turn.question_saved, turn.disk_full))
        self._record_finish(turn, error)
        self._guard(turn, lambda s: s.drop_turn_state(*turn.open_states))
        log.emit(
            Done(
                status=turn.status,
                answer=turn.answer,
                rounds=rounds,
                usage=usage,
                elapsed=round(time.monotonic() - turn.started, 3),
            )
        )
        log.flush()
        # A finished turn needs no copy of the conversation (the session keeps it): without
        # this, every turn of a long session held the whole history (issue 14).
        turn.ctx.history = []

    def _with_context(self, turn: Turn, resume: Resume | None) -> str:
        """The question with the context the learner attached, each shown first as the card of
        the notebook-context tool that read it: the card is what the model reads."""
        ctx, log = turn.ctx, turn.log
        if not ctx.context or resume is not None:
            return ctx.question
        secrets = usable(turn.deps.secrets)
        blocks = []
        for item in ctx.context:
            content, summary = scrub_text(item.content, secrets), scrub_text(item.summary, secrets)
            log.emit(ToolCallStarted(id=item.id, name=item.name, arguments=item.arguments))
            log.emit(ToolCallFinished(id=item.id, name=item.name, content=content, summary=summary))
            blocks.append(content)
        return "\n\n".join([*blocks, ctx.question])

    async def _chat(
        self, turn: Turn, model: ChatModel, question: Message, resume: Resume | None
    ) -> Any:
        from deeptutor_jupyter.agent.loop import AgentLoop

        ctx = turn.ctx
        if turn.previous is not None and not turn.previous.done():
            turn.log.emit(Notice(text=WAITING_FOR_PREVIOUS))
            await asyncio.wait([turn.previous])
        turn.previous = None
        if self.registry.sources and (
            ctx.enabled_tools is None or LoadToolsTool.name in ctx.enabled_tools
        ):
            # Tool sources (MCP servers) start at the first turn that may use them, not at load.
            for note in await self.registry.discover():
                turn.log.emit(Notice(text=note, stage="tools"))
        if ctx.enabled_tools is None:
            ctx.enabled_tools = [n for n in self.registry.names() if n != LoadToolsTool.name]
            ctx.enabled_tools = [n for n in ctx.enabled_tools if not self._deferred(n)]
            if any(self._deferred(n) for n in self.registry.names()):
                ctx.enabled_tools.append(LoadToolsTool.name)
        # The live list: load_tools adds to it (and so to the state a paused turn saves).
        names = ctx.enabled_tools
        turn.deps.forms = self.coordinator is not None and turn.interactive
        tool_ctx = ToolContext(
            session_id=ctx.session_id, turn_id=ctx.turn_id, workspace=Path.cwd(), deps=turn.deps
        )

        async def execute(call: ToolCall) -> ToolResult:
            if call.name not in names and LoadToolsTool.name in names and self._deferred(call.name):
                self._load(turn, agent, call.name)  # listed in the manifest: load it and run it
            if call.name not in names:
                available = ", ".join(names) or "none"
                why = self.registry.why_missing(call.name)
                return ToolResult(
                    content=f"Tool '{call.name}' is not available in this turn"
                    + (f": {why}" if why else "")
                    + f". Available tools: {available}.",
                    is_error=True,
                )
            quizzes = turn.deps.quizzes
            if call.name == AskUserTool.name and self.coordinator and turn.interactive:
                result = await self._ask(turn, agent, call)
            elif call.name == MakeQuizTool.name and quizzes is not None and turn.interactive:
                result = await self._quiz(turn, agent, call, quizzes)
            elif call.name == LoadToolsTool.name:
                result = self._load_tools(turn, agent, call)
            else:
                result = await self.registry.execute(
                    call, self._call_context(turn, agent, call, tool_ctx)
                )
            return redact(result, turn.deps.secrets)

        agent = AgentLoop(
            model,
            execute,
            without_quiz_answers(turn.log.emit),  # events reach browsers; answers must not
            tools=self.registry.schemas(names),
            max_rounds=ctx.profile.max_rounds,
            max_tool_calls=ctx.profile.max_tool_calls,
            max_tokens=ctx.profile.max_tokens,
            temperature=ctx.profile.temperature,
        )
        if resume is not None:
            if turn.resolved is not None:
                # Said first, as the live turn would have: every surface (and the saved
                # Markdown) shows what was answered while the turn was saved.
                turn.log.emit(turn.resolved)
            return await agent.resume(*resume)
        if ctx.attachments:
            question = await self._explore(turn, model, question)
        blocks = [SYSTEM_PROMPT, *ctx.system_blocks]
        if LoadToolsTool.name in names:
            waiting = [
                t for n in self.registry.names() if (t := self._deferred(n)) and n not in names
            ]
            blocks.append(deferred_manifest(waiting, self.registry.unavailable()))
        return await agent.run("\n\n".join(b for b in blocks if b), ctx.history, question)

    def _deferred(self, name: str) -> Tool[Any] | None:
        tool = self.registry.get(name)
        return tool if tool is not None and tool.deferred else None

    def _load_tools(self, turn: Turn, agent: Any, call: ToolCall) -> ToolResult:
        checked = self.registry.validate(call)
        if isinstance(checked, ToolResult):
            return checked
        args = checked[1]
        assert isinstance(args, LoadToolsArgs) and turn.ctx.enabled_tools is not None
        names = turn.ctx.enabled_tools
        loaded, unknown = [], []
        for name in args.names:
            if name in names:
                loaded.append(name)
            elif self._deferred(name) is not None:
                self._load(turn, agent, name)
                loaded.append(name)
            else:
                unknown.append(name)
        parts = [f"Loaded: {', '.join(loaded)}. Call them directly now."] if loaded else []
        if unknown:
            known = [n for n in self.registry.names() if self._deferred(n)]
            parts.append(
                f"No deferred tool named {', '.join(unknown)}. Deferred tools: "
                f"{', '.join(known) or 'none'}."
            )
        return ToolResult(content=" ".join(parts), is_error=not loaded, summary=" ".join(parts))

    def _load(self, turn: Turn, agent: Any, name: str) -> None:
        """A deferred tool joins the turn's live list (and the session's loaded tools)."""
        assert turn.ctx.enabled_tools is not None
        turn.ctx.enabled_tools.append(name)
        agent.tools.append(self.registry.schemas([name])[0])
        turn.deps.loaded_tools.add(name)

    def _call_context(
        self, turn: Turn, agent: Any, call: ToolCall, ctx: ToolContext
    ) -> ToolContext:
        """The tool context of one call: where a form can be shown, a tool may ask the learner
        (an MCP elicitation), as an ask_user question of this very call."""
        if self.coordinator is None or not turn.interactive:
            return ctx

        async def ask(arguments: dict[str, Any]) -> dict[str, Any]:
            assert self.coordinator is not None
            args = AskUserArgs.model_validate(arguments)
            result = await self.coordinator.ask(
                call=call, args=args, emit=turn.log.emit, **self._checkpoint(turn, agent)
            )
            return dict(result.data or {})

        return replace(ctx, ask=ask)

    async def _explore(self, turn: Turn, model: ChatModel, question: Message) -> Message:
        """Attachments are read by a separate pass; the answer loop gets its objective notes
        and never the read tool (a pasted transcript must not become the tutor's voice)."""
        from deeptutor_jupyter.runtime.explore import explore, seed_message

        ctx = turn.ctx
        paths = [Path(p) for p in ctx.attachments]
        summary = await explore(model, paths, ctx.question, turn.log.emit)
        return {"role": "user", "content": seed_message(summary, ctx.question)}

    async def _ask(self, turn: Turn, agent: Any, call: ToolCall) -> ToolResult:
        """ask_user is intercepted before any executor; bad arguments go back to the model."""
        assert self.coordinator is not None
        checked = self.registry.validate(call)
        if isinstance(checked, ToolResult):
            return checked
        args = checked[1]
        assert isinstance(args, AskUserArgs)
        return await self.coordinator.ask(
            call=call, args=args, emit=turn.log.emit, **self._checkpoint(turn, agent)
        )

    async def _quiz(self, turn: Turn, agent: Any, call: ToolCall, quizzes: Any) -> ToolResult:
        """make_quiz is intercepted like ask_user (interaction/quiz.py grades it)."""
        checked = self.registry.validate(call)  # bad arguments go back to the model
        if isinstance(checked, ToolResult):
            return checked
        result: ToolResult = await quizzes.ask(
            call=call,
            args=checked[1],
            emit=turn.log.emit,
            grader=model_completer(agent.model),
            **self._checkpoint(turn, agent),
        )
        return result

    def _checkpoint(self, turn: Turn, agent: Any) -> dict[str, Any]:
        """What every kind of pause saves with its pending row: the one ``SavedTurn``, where
        the turn shows, and the saved states this checkpoint replaces (dropped once it is
        written; ``on_saved`` records the new one)."""
        ctx = turn.ctx
        saved = SavedTurn(
            context=ctx,
            loop=agent.state.to_json(),
            compat=ModelCompat(
                stream_options=agent.model.compat.stream_options,
                native_tools=agent.model.compat.native_tools,
            ),
        )
        turn.log.flush()
        superseded, turn.open_states = turn.open_states, []
        return {
            "session_id": ctx.session_id,
            "turn_id": ctx.turn_id,
            "snapshot": saved.dump(),
            "place": ctx.metadata.get("place") or None,
            "supersedes": superseded,
            "on_saved": turn.open_states.append,
        }

    # store writes: a failed one is reported; a full disk ends the turn (``_disk_full``) -------
    def _guard(self, turn: Turn, action: Callable[[Store], None]) -> bool:
        if self.store is None:
            return False
        try:
            action(self.store)
        except DiskFullError as exc:
            self._disk_full(turn, str(exc))  # said once, in the turn's error card
            return False
        except Exception as exc:
            turn.log.emit(Notice(text=f"Not saved: {exc}"))
            return False
        return True

    def _disk_full(self, turn: Turn, why: str) -> None:
        """The store cannot keep the turn: stop it (it ends as failed, saying what was kept)
        rather than stream on into memory while its row says ``running`` for good."""
        if turn.disk_full is None:
            turn.disk_full = why
            if turn.status == "running":  # not once it is ending: its task would end cancelled
                turn.cancel(why)

    def _record_start(self, turn: Turn) -> None:
        c = turn.ctx
        for turn_id, (status, error) in list(self.unsaved_ends.items()):
            # An earlier turn's end the full disk refused; there may be room again now.
            if self._record_end(turn, turn_id, status, error):
                del self.unsaved_ends[turn_id]
        turn.question_saved = self._guard(
            turn,
            lambda s: s.record_turn_start(
                c.turn_id,
                c.session_id,
                scrub_text(c.question, usable(turn.deps.secrets)),
                c.profile.label,
                c.cell_id,
                turn.owner,
                shown=scrub_text(c.metadata["shown"], usable(turn.deps.secrets))
                if c.metadata.get("shown")
                else None,
            ),
        )

    def _record_messages(self, turn: Turn, messages: list[Message]) -> None:
        c = turn.ctx
        turn.messages = messages
        self._guard(turn, lambda s: s.append_messages(c.session_id, c.turn_id, messages))

    def _record_end(self, turn: Turn, turn_id: str, status: str, error: str | None) -> bool:
        return self._guard(turn, lambda s: s.record_turn_end(turn_id, status, None, error))

    def _record_finish(self, turn: Turn, error: str | None) -> None:
        # After a full disk, the status alone: it rewrites a row in place, where an answer
        # would need room; if even that fails, the next turn's start writes it.
        answer = None if turn.disk_full else turn.answer
        saved = self._guard(
            turn, lambda s: s.record_turn_end(turn.turn_id, turn.status, answer, error)
        )
        if not saved and turn.disk_full:
            self.unsaved_ends[turn.turn_id] = (turn.status, error)


def redact(result: ToolResult, secrets: Iterable[str]) -> ToolResult:
    """A tool can read what the learner has (a variable, a cell): the configured API key must
    not travel from there to the model, the events, the history or the tool card. Every tool's
    result is scrubbed, its data and summary as much as its content."""
    keys = usable(secrets)
    content, data = scrub_text(result.content, keys), scrub(result.data, keys)
    summary = scrub_text(result.summary, keys)
    if (content, data, summary) == (result.content, result.data, result.summary):
        return result
    return ToolResult(content, result.is_error, data, summary, result.stop_turn)


def _streamed_text(log: EventLog) -> str:
    """What the learner saw of the answer; the explore pass's notes are not part of it."""
    parts = []
    for event in log.events:
        match event.body:
            case Content(text=text, explore=False):
                parts.append(text)
    return "".join(parts)


def _hits(log: EventLog) -> list[dict[str, Any]]:
    """The knowledge-base passages the turn's tools found, for its ``sources`` event."""
    hits: list[dict[str, Any]] = []
    for event in log.events:
        match event.body:
            case ToolCallFinished(data=data):
                hits += data.get("hits", [])
    return hits
