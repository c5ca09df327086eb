"""``TutorSession``: the one entry every surface drives (cell, sidebar comm, terminal, tests).

It owns what lives as long as the process serves one notebook: the store, the coordinator, the
learner's memory, the models (each with the degradations learned for it), the keys to redact,
the conversation and the tools loaded in it. A surface asks (``ask``), answers (``submit``),
lists (``pending``), stops (``stop``) and renders the events it subscribes to; it never runs a
loop of its own. Recording the trace and extending the history happen here, on ``done``, so every
surface gets the same trace for the same turn; so does starting the background consolidation of
the learner's memory (``runtime/upkeep.py``).

The session is sealed: its store, coordinator and orchestrator are private, and what surfaces
read (conversations, pending questions, saved events) it offers as methods
(tests/test_sealed_session.py). Its parts are objects it owns: the planner (runtime/plan.py),
the watcher (runtime/watcher.py) and the upkeep; the home is opened by runtime/home.py, the
same function the server extension uses.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.runtime.ask import AskOptions, new_session_id, new_turn_id, profile_of
from deeptutor_jupyter.runtime.session_edits import SessionEdits
from deeptutor_jupyter.runtime.session_reads import SessionReads
from deeptutor_jupyter.runtime.upkeep import MemoryUpkeep
from deeptutor_jupyter.words import plural

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator, Result, Wire
    from deeptutor_jupyter.interaction.owners import Owner
    from deeptutor_jupyter.learning.policy import Decision
    from deeptutor_jupyter.learning.quiz import QuizOutcome
    from deeptutor_jupyter.memory import MemoryStore
    from deeptutor_jupyter.messages import Message
    from deeptutor_jupyter.providers.base import ChatModel
    from deeptutor_jupyter.runtime.choice import Choice
    from deeptutor_jupyter.runtime.events import Event, EventLog, Subscriber
    from deeptutor_jupyter.runtime.learning import Learning
    from deeptutor_jupyter.runtime.orchestrator import Orchestrator, Turn
    from deeptutor_jupyter.runtime.plan import Planner
    from deeptutor_jupyter.runtime.policy_gate import GatedTurn, PolicyGate
    from deeptutor_jupyter.runtime.saved_turn import SavedTurn
    from deeptutor_jupyter.runtime.watcher import Watcher
    from deeptutor_jupyter.store.db import PendingRow, QuestionState, Store
    from deeptutor_jupyter.tools.base import Tool, ToolDeps
    from deeptutor_jupyter.tools.mcp import McpServers

__all__ = ["AskOptions", "TutorSession"]  # AskOptions lives in runtime/ask.py

RESUMABLE = ("chat", "solve")  # capabilities whose saved turns this runtime continues


class TutorSession(SessionReads, SessionEdits):
    def __init__(
        self,
        notebook: str,
        *,
        resolve: Callable[[dict[str, Any]], ResolvedSettings],
        workspace: Callable[[], Path] = Path.cwd,
        tools: Callable[[], list[Tool[Any]]] = list,
        instructions: Callable[[Path], list[str]] | None = None,
        surface: str = "notebook",
        mcp: McpServers | None = None,
    ) -> None:
        self.notebook = notebook
        self.resolve = resolve
        self.workspace = workspace
        self._tools = tools
        self._instructions = instructions or (lambda _root: [])
        self.surface = surface
        self.language = "en"
        self._store: Store | None = None
        self._coordinator: InteractionCoordinator | None = None
        self._orchestrator: Orchestrator | None = None
        self._planner: Planner | None = None
        self._watcher: Watcher | None = None
        # Quizzes, reviews, the learner's standing (runtime/learning.py), opened with the store.
        self._learning: Learning | None = None
        self.memory: MemoryStore | None = None
        self.owner: Owner | None = None
        self.session_id = ""
        self.history: list[Message] = []
        self.turns: list[Turn] = []  # every turn this process started or resumed, in order
        self.models: dict[tuple[str, ...], ChatModel] = {}
        self.keys: set[str] = set()
        self.event_loop: asyncio.AbstractEventLoop | None = None
        # A surface hook: show a turn this process resumed for an answer given here.
        self.on_resumed: Callable[[Turn, PendingRow], None] | None = None
        # Where a turn shown by this process appears, for receipts elsewhere ({"notebook", "cell"}).
        self.place: Callable[[], dict[str, Any]] = lambda: {"notebook": Path(notebook).name}
        # L2/L3 consolidation in a background thread after turns (runtime/upkeep.py).
        self.upkeep = MemoryUpkeep(self)
        self._policy: PolicyGate | None = None  # the instructor's AI policy (learning/policy.py)
        # The MCP servers of settings.toml (tools/mcp/), started at the first turn; a caller
        # may hand in servers it shares between sessions (a test module).
        self.mcp: McpServers | None = mcp
        self._owns_mcp = mcp is None  # servers handed in are stopped by whoever made them

    # opening -----------------------------------------------------------------------------
    @property
    def home(self) -> Path | None:
        return self._store.path.parent if self._store is not None else None

    @property
    def is_open(self) -> bool:
        return self._store is not None

    def open(self, resolved: ResolvedSettings) -> None:
        """Open the store and find this notebook's conversation; cheap once opened."""
        home = resolved.settings.home
        self.language = resolved.settings.language
        if self._store is None or self._store.path != home / "state.db":
            from deeptutor_jupyter.interaction.owners import Owner, register
            from deeptutor_jupyter.memory import MemoryStore
            from deeptutor_jupyter.runtime.home import open_home
            from deeptutor_jupyter.runtime.learning import open_learning
            from deeptutor_jupyter.runtime.orchestrator import Orchestrator
            from deeptutor_jupyter.runtime.plan import Planner, runtime_tools
            from deeptutor_jupyter.runtime.watcher import Watcher

            self.owner = Owner.this_process(self.notebook)
            opened = open_home(
                home,
                workspace=self.workspace(),
                expiry_seconds=resolved.settings.ask_timeout_hours * 3600,
                owner=self.owner,
            )
            self._store, self._coordinator = opened.store, opened.coordinator
            self._coordinator.on_orphan = self._orphan_answered
            self._coordinator.can_resume = self.can_resume
            if self._learning is not None:
                self._learning.close()
            # Every kind of pause shares the coordinator's deferred calls (one owner rule).
            self._learning = open_learning(self, self._coordinator.calls, home)
            self._orchestrator = Orchestrator(self._store, coordinator=self._coordinator)
            for tool in (*self._tools(), *runtime_tools()):
                self._orchestrator.registry.register(tool)
            self.refresh_mcp(home)
            self.memory = MemoryStore(home)
            self._planner = Planner(
                self._orchestrator.registry,
                self.memory,
                notebook=self.notebook,
                surface=self.surface,
                secrets=self.secrets,
                standing=self._standing,
                quizzes=lambda at: self.learning(at).quizzes,
                answered=self._answered_call,
            )
            self._watcher = Watcher(
                self._store, self._coordinator, self.owner, lambda: len(self.running_turns())
            )
            self.event_loop = _running_loop()
            self.session_id = ""
            register(self._store, self.owner)
            self.housekeeping()
        if not self.session_id:
            existing = self._store.latest_session(self.notebook)
            if existing:
                self.session_id = existing
                self.history = self._store.history(existing)
            else:
                self.new_conversation()

    def refresh_mcp(self, home: Path) -> None:
        """Read the MCP servers of settings.toml again, as the course's packs allow them; they
        join the registry as a tool source. Nothing is imported from the SDK and no server
        starts here: a turn that plans its tools starts them (runtime/orchestrator.py)."""
        from deeptutor_jupyter.runtime.course_files import installed
        from deeptutor_jupyter.tools.mcp import McpServers, read_servers
        from deeptutor_jupyter.tools.mcp.config import restrict

        config = restrict(read_servers(home), [(p.label(), p.root) for p in installed(home)])
        if self.mcp is None:
            if not config.servers and not config.problems:
                return
            self.mcp = McpServers()
        self.mcp.configure(config)
        assert self._orchestrator is not None
        sources = self._orchestrator.registry.sources
        if self.mcp not in sources:
            sources.append(self.mcp)

    def _answered_call(self, session_id: str, tool_call_id: str) -> PendingRow | None:
        return self._store.answered_call(session_id, tool_call_id) if self._store else None

    def learning(self, home: Path | None = None) -> Learning:
        """The learning part this session owns (runtime/learning.py), opened with its store
        (``home`` names the home the caller opened, for a check)."""
        assert self._learning is not None, "the session's learning opens with its store"
        assert home is None or home == self._learning.home
        return self._learning

    def _standing(self, home: Path) -> str:
        from deeptutor_jupyter.runtime.learning import standing_text

        return standing_text(self.learning(home).store)

    def _plan(self) -> Planner:
        assert self._planner is not None, "the session plans turns once it is open"
        return self._planner

    def close(self) -> None:
        """Close the store at the end of the session's life (a test's teardown)."""
        if self._store is not None:
            self._store.close()
        if self._learning is not None:
            self._learning.close()
        if self._policy is not None:
            self._policy.close()
        if self.mcp is not None and self._owns_mcp:
            self.mcp.close()

    def housekeeping(self) -> None:
        """What a semester of use needs at each start: turns killed mid-flight are marked
        ``interrupted``, and questions whose resumed turn died before its next checkpoint are
        answerable again (their answer kept). Both are O(what is running or pending)."""
        from deeptutor_jupyter.interaction.owners import live_owner_ids

        assert self._store is not None
        try:
            live = live_owner_ids(self._store)
            self._store.interrupt_orphaned_turns(live)
            self._store.reopen_unfinished(live)
        except Exception:  # a read-only store still serves reads; the next start tries again
            pass

    def new_conversation(self) -> str:
        self.session_id = new_session_id(self.notebook)
        self.history = []
        if self._store is not None:
            self._store.ensure_session(self.session_id, self.notebook)
        return self.session_id

    def model_for(self, resolved: ResolvedSettings, *, cached: bool = True) -> ChatModel:
        """The model of these settings; cached models keep the degradations learned for them.

        ``cached=False`` gives a fresh one, for a caller whose event loop will not outlive it.
        """
        from deeptutor_jupyter.providers import model_from_settings

        s = resolved.settings
        key = s.api_key.get_secret_value() if s.api_key is not None else None
        if key:
            self.keys.add(key)
        key_id = hashlib.sha256((key or "").encode()).hexdigest()[:12]
        timeouts = (s.timeout, s.connect_timeout, s.idle_timeout, s.turn_deadline, s.max_retry_wait)
        cache_key = (s.provider or "", s.model or "", s.base_url or "", key_id, str(timeouts))
        model = self.models.get(cache_key) if cached else None
        if model is None:
            model = model_from_settings(s)
            if cached:
                self.models[cache_key] = model
        return model

    def secrets(self) -> list[str]:
        """What every output, trace and log is scrubbed of: the model keys, and the values of
        the MCP servers' ``env`` and ``headers``."""
        from deeptutor_jupyter.redact import register

        mcp = self.mcp.secrets() if self.mcp is not None else []
        found = [k for k in (*self.keys, *mcp) if k]
        register(*found)  # and the doors out of the loop take them out too (redact.py)
        return found

    # asking ------------------------------------------------------------------------------
    def ask(
        self,
        question: str,
        resolved: ResolvedSettings,
        options: AskOptions | None = None,
        *,
        model: ChatModel | None = None,
    ) -> Turn:
        """Start a turn on the running loop and return it at once; raises ``PlanError`` when
        the turn cannot start as asked (an unknown knowledge base)."""
        from deeptutor_jupyter import limits
        from deeptutor_jupyter.runtime.compaction import compact_history
        from deeptutor_jupyter.runtime.context import TurnContext
        from deeptutor_jupyter.runtime.events import EventLog
        from deeptutor_jupyter.runtime.plan import PlanError

        if len(question) > limits.QUESTION_CHARS:
            # Every door asks here (%tutor, the panel, the terminal, the hosts): refused before
            # anything is stored or sent, in words every surface already shows (PlanError).
            raise PlanError(
                limits.too_long("Your question", len(question), limits.QUESTION_CHARS)
                + " Attach a long text as a file or a cell instead."
            )
        opts = options or AskOptions()
        s = resolved.settings
        self.open(resolved)
        # New, or the current one was deleted meanwhile (the panel of another kernel of this
        # notebook): a deleted conversation takes no more turns (runtime/session_edits.py).
        if opts.new or self.session_id not in self.notebook_sessions():
            self.new_conversation()
        assert self._orchestrator is not None and self._store is not None
        self._store.ensure_session(self.session_id, self.notebook)
        resolved, opts = self._chosen(resolved, opts)  # the conversation's model and KBs
        s = resolved.settings
        self.refresh_mcp(s.home)  # settings.toml or the course's allow-list may have changed
        model = model or self.model_for(resolved)  # first: it registers the key to redact
        plan = self._plan().plan_turn(
            self.session_id,
            s,
            kbs=opts.kbs,
            user_tools=opts.user_tools,
            no_tools=opts.no_tools,
            instructions=self._instructions(self.workspace()),
            capability=opts.capability,
        )
        gated = self._gate(opts, model, s.home)
        model = gated.model  # off: never asked; hints: code blocks withheld
        # A long conversation is summarised before it outgrows the model's context.
        self.history, compaction = compact_history(self.history, s.context_budget)
        ctx = TurnContext(
            session_id=self.session_id,
            turn_id=opts.turn_id or new_turn_id(),
            question=question,
            profile=profile_of(s),
            capability=opts.capability,
            history=self.history,
            cell_id=opts.cell_id,
            language=s.language,
            system_blocks=[*plan.system_blocks, *gated.blocks],
            enabled_tools=plan.enabled_tools,
            attachments=[str(p.resolve()) for p in opts.attachments],
            context=opts.context,
            # a resumed turn selects the same knowledge bases and shows in the same place
            metadata={
                "kbs": opts.kbs,
                "place": opts.place or self.place(),
                "policy": gated.payload(),
                "shown": opts.shown,
                "instructions": opts.instructions,
                "replaces": opts.replaces,
            },
        )
        log = EventLog(ctx.turn_id, self._store)
        self._follow(log)
        turn = self._orchestrator.start_turn(
            ctx, model, log, plan.deps, interactive=opts.interactive, owner=self._owner_id()
        )
        self._track(turn)
        from deeptutor_jupyter.agent.events import Notice

        if gated.decision.source:  # the badge: the policy in force and where it comes from
            log.emit(Notice(text=gated.badge, stage="policy", reason=gated.decision.mode))
        if compaction is not None:
            log.emit(Notice(text=compaction.notice, stage="compacted"))
        return turn

    # choosing the model and knowledge bases (runtime/choice.py) ----------------------------
    def choices(self, resolved: ResolvedSettings) -> dict[str, Any]:
        """What the panel's chooser shows, names only: the current conversation's choice, the
        models and knowledge bases it may choose from, and the configured model."""
        from deeptutor_jupyter.runtime.choice import kb_names, offered_models, read_choice

        self.open(resolved)
        assert self._store is not None
        return {
            "session_id": self.session_id,
            "choice": read_choice(self._store, self.session_id).wire(),
            "models": offered_models(resolved, self._decision(resolved, ())),
            "default_model": resolved.settings.model or "",
            "kbs": kb_names(resolved.settings.home),
        }

    def choose(
        self, resolved: ResolvedSettings, session_id: str, model: str | None, kbs: list[str]
    ) -> Choice:
        """Choose the model (None: the configured one) and knowledge bases of one of this
        notebook's conversations; raises ``ChoiceError`` in words for what may not be chosen."""
        from deeptutor_jupyter.runtime.choice import (
            Choice,
            ChoiceError,
            check_kbs,
            check_model,
            kb_names,
            offered_models,
            save_choice,
        )
        from deeptutor_jupyter.runtime.session_reads import is_of

        self.open(resolved)
        assert self._store is not None
        if session_id != self.session_id and not is_of(self._store, self.notebook, session_id):
            raise ChoiceError("No such conversation in this notebook.")
        choice = Choice(model or None, tuple(dict.fromkeys(kbs)))
        if choice.model is not None:
            decision = self._decision(resolved, ())
            check_model(choice.model, offered_models(resolved, decision), decision)
        check_kbs(choice.kbs, kb_names(resolved.settings.home))
        self._store.ensure_session(session_id, self.notebook)
        save_choice(self._store, session_id, choice)
        return choice

    def _chosen(
        self, resolved: ResolvedSettings, opts: AskOptions
    ) -> tuple[ResolvedSettings, AskOptions]:
        """The conversation's choice applied to a turn (a cell's own --model/--kb win), checked
        again: the settings or the instructor's policy may have changed since it was made."""
        from dataclasses import replace

        from deeptutor_jupyter.runtime.choice import (
            ChoiceError,
            check_model,
            chosen_by_cell,
            kb_names,
            offered_models,
            read_choice,
            with_model,
        )
        from deeptutor_jupyter.runtime.plan import PlanError

        assert self._store is not None
        choice = read_choice(self._store, self.session_id)
        if choice.kbs and not opts.kbs:
            known = set(kb_names(resolved.settings.home))
            if gone := [k for k in choice.kbs if k not in known]:
                raise PlanError(
                    f"The knowledge base {', '.join(gone)} chosen for this conversation in the "
                    "Tutor panel no longer exists: choose another (or none) there."
                )
            opts = replace(opts, kbs=list(choice.kbs))
        decision = self._decision(resolved, opts.tags)
        try:
            if choice.model is not None and not chosen_by_cell(resolved):
                check_model(choice.model, offered_models(resolved, decision), decision)
                resolved = with_model(resolved, choice.model)
            elif decision.models and resolved.settings.model not in decision.models:
                check_model(resolved.settings.model or "", [], decision)  # the policy's words
        except ChoiceError as exc:
            raise PlanError(str(exc)) from None
        return resolved, opts

    def _decision(self, resolved: ResolvedSettings, tags: tuple[str, ...]) -> Decision:
        return self._policy_gate().gate(resolved.settings.home, self.workspace(), tags)

    def _policy_gate(self) -> PolicyGate:
        from deeptutor_jupyter.runtime.policy_gate import PolicyGate

        if self._policy is None:
            self._policy = PolicyGate()
        return self._policy

    def _gate(self, opts: AskOptions, model: ChatModel, home: Path) -> GatedTurn:
        """The instructor's policy for this question (runtime/policy_gate.py)."""
        policy = self._policy_gate()
        cell, workspace = opts.cell_id, self.workspace()
        decision = policy.gate(home, workspace, opts.tags)
        return policy.apply(
            decision, model, home, self.notebook, cell, workspace, opts.tags, opts.hidden_tests
        )

    async def run(
        self,
        question: str,
        resolved: ResolvedSettings,
        options: AskOptions | None = None,
        subscriber: Subscriber | None = None,
    ) -> Turn:
        """Ask and wait for the end, for a caller that owns its event loop (a terminal)."""
        model = self.model_for(resolved, cached=False)  # its client belongs to this loop
        try:
            turn = self.ask(question, resolved, options, model=model)
            if subscriber is not None:
                turn.log.subscribe(subscriber)
            assert turn.task is not None
            await asyncio.wait([turn.task])
        finally:
            await model.aclose()
        return turn

    def _owner_id(self) -> str | None:
        return self.owner.id if self.owner is not None else None

    def _track(self, turn: Turn) -> None:
        self.turns.append(turn)
        if turn.task is not None:
            turn.task.add_done_callback(lambda _t: _let_go(turn))
        watcher = self._watcher
        if watcher is None:
            return
        if turn.task is not None:
            turn.task.add_done_callback(lambda _t: watcher.stop_if_idle())
        watcher.start()

    def _follow(self, log: EventLog) -> None:
        """The runtime's own subscriber: trace and history on ``done``, before any view."""
        from deeptutor_jupyter.agent.events import Done

        def on_event(event: Event) -> None:
            if not isinstance(event.body, Done):
                return
            turn = self.turn_of(log.turn_id)
            if turn is None:
                return
            turn.trace = self._plan().record_trace(turn, log)
            if self.session_id == turn.ctx.session_id and turn.messages:
                self.history.extend(turn.messages)
            if not (turn.ctx.metadata.get("policy") or {}).get("refused"):
                # A turn the policy refused asks no model, not even for the memory's upkeep.
                self.upkeep.after_turn()  # returns at once; the work runs on its own thread

        log.subscribe(on_event)

    # answering ---------------------------------------------------------------------------
    def submit(
        self,
        session_id: str,
        request_id: str,
        selections: list[str] | None = None,
        custom_input: str = "",
        cancelled: bool = False,
    ) -> Result:
        """Answer a waiting question: consumed once; the turn goes on in its owner's cell, or
        here when its owner is gone. Raises ``InteractionError`` when refused, including a store
        that cannot be written (``StoreUnavailable``, code ``store``)."""
        from deeptutor_jupyter.interaction.coordinator import StoreUnavailable, UnknownRequest
        from deeptutor_jupyter.store.db import StoreError

        if self._coordinator is None:
            raise UnknownRequest(f"There is no question with id {request_id!r}.")
        try:
            return self._coordinator.submit(
                session_id, request_id, selections, custom_input, cancelled
            )
        except StoreError as exc:
            if isinstance(exc, StoreUnavailable):
                raise
            raise StoreUnavailable(str(exc)) from exc

    async def submit_quiz(
        self,
        session_id: str,
        quiz_id: str,
        answers: dict[str, Any],
        seconds: float | None = None,
        grader: Any = None,
    ) -> QuizOutcome:
        """Answer a quiz or review from any surface: graded once from the stored quiz; the
        turn goes on in its owner's cell, or here when its owner is gone. Raises
        ``InteractionError`` when refused."""
        from deeptutor_jupyter.interaction.coordinator import UnknownRequest

        if self._learning is None:
            raise UnknownRequest(f"There is no quiz with id {quiz_id!r}.")
        return await self._learning.quizzes.submit(session_id, quiz_id, answers, seconds, grader)

    def continues_in(self, request_id: str) -> dict[str, Any] | None:
        """Where the turn of an answered call (question or quiz) goes on, when that is
        another process."""
        assert self._store is not None and self._coordinator is not None
        row = self._store.get_pending(request_id)
        if row is None or not self._coordinator.owner_elsewhere(row):
            return None
        return dict(row.place or {"notebook": _owner_label(self._store, row.owner)})

    def pending(
        self, all_sessions: bool = False, *, session_id: str | None = None
    ) -> list[PendingRow]:
        """What waits for this notebook (every notebook's with ``all_sessions``, one
        conversation's with ``session_id``), every kind: questions, quizzes, reviews; stale
        ones expire."""
        assert self._store is not None and self._coordinator is not None
        if session_id:
            sessions: list[str] | None = [session_id]
        else:
            sessions = None if all_sessions else self._store.sessions_of(self.notebook)
        return self._coordinator.expire_stale(self._store.pending_for(sessions))

    def answerable(self, row: PendingRow) -> bool:
        """Whether an answer given here can go on: its owner lives, or this process resumes."""
        return self._coordinator is not None and self._coordinator.answerable(row)

    def can_resume(self, row: PendingRow) -> bool:
        try:
            return self.saved_state(row) is not None
        except Exception:  # a damaged state is a state that cannot be restored
            return False

    def saved_state(self, row: PendingRow) -> SavedTurn | None:
        """The paused turn of this call if this process can continue it, else None."""
        from deeptutor_jupyter.runtime.saved_turn import read_saved

        assert self._store is not None and self._orchestrator is not None
        saved = read_saved(self._store.turn_state(row.request_id))
        if saved is None or saved.context.capability not in RESUMABLE:
            return None
        if saved.waiting_on != row.tool_call_id:
            return None
        wanted = saved.context.enabled_tools
        if wanted and any(self._orchestrator.registry.get(n) is None for n in wanted):
            return None
        if not self.resolve(saved.profile_flags).ready:
            return None
        return saved

    def _orphan_answered(self, row: PendingRow, result: Wire) -> None:
        """Called by the deferred calls, maybe on a subshell thread: resume on the loop."""
        loop = self.event_loop or _running_loop()
        assert loop is not None, "an orphaned call is only resumed where a loop runs"
        loop.call_soon_threadsafe(self.resume, row, result)

    def resume(self, row: PendingRow, result: Wire) -> Turn | None:
        """The one door of every kind of pause: continue here the saved turn of a call whose
        owner is gone, with its result. The saved state is dropped only once the resumed turn
        checkpoints again or ends."""
        from deeptutor_jupyter.runtime.events import EventLog

        assert self._store is not None and self._orchestrator is not None
        assert self._coordinator is not None
        saved = self.saved_state(row)
        if saved is None:
            return None  # submit() checked can_resume first; only if settings changed since
        resolved = self.resolve(saved.profile_flags)
        # The policy applies to a resumed turn too, read again at each of its rounds.
        home = resolved.settings.home
        model = self._policy_gate().guard(self.model_for(resolved), home, self.workspace(), ())
        self._store.claim_pending(row.request_id, self._owner_id() or "", self.place())
        log = EventLog(row.turn_id, self._store)  # resume_turn continues the saved seq
        self._follow(log)
        deps = self._plan().resume_deps(self.session_id, resolved.settings.home, saved.kbs)
        calls = self._coordinator.calls
        turn = self._orchestrator.resume_turn(
            saved,
            calls.tool_result(row, result),
            model,
            log,
            deps,
            resumed_from=row.request_id,
            owner=self._owner_id(),
            resolved=calls.resolved_event(row, result),
        )
        self._track(turn)
        if self.on_resumed is not None:
            self.on_resumed(turn, row)
        return turn

    # stopping and following --------------------------------------------------------------
    def running_turns(self) -> list[Turn]:
        if self._orchestrator is None:
            return []
        return list(self._orchestrator.running.values())

    def stop(self, turn_id: str, reason: str = "") -> bool:
        """Thread-safe: widget callbacks may run on a subshell thread."""
        turn = self.turn_of(turn_id)
        if turn is None or turn.task is None or turn.task.done():
            return False
        turn.task.get_loop().call_soon_threadsafe(turn.cancel, reason)
        return True

    async def wait(self, timeout: float) -> list[Turn]:
        """Every turn, once none is running; raises ``TurnsStillRunning`` (naming them) when
        some still run after ``timeout``: returning them as if finished hid a stuck turn."""
        pending = [t.task for t in self.turns if t.task is not None and not t.task.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        running = [t for t in self.turns if t.task is not None and not t.task.done()]
        if running:
            raise TurnsStillRunning(running, list(self.turns), timeout)
        return list(self.turns)

    def watch_question(self, request_id: str, update: Callable[[QuestionState], bool]) -> None:
        """Tell ``update`` how a question whose turn runs elsewhere moves on (answered there,
        expired, its turn finished) until it returns True (nothing more to follow)."""
        if self._watcher is not None:
            self._watcher.follow(request_id, update)


class TurnsStillRunning(DeepTutorError, TimeoutError):
    """``wait_for_turns`` timed out: ``.running`` are the turns still running, ``.turns`` all
    of them (the finished ones keep their ``.status`` and ``.answer``)."""

    code = "turns_running"

    def __init__(self, running: list[Turn], turns: list[Turn], timeout: float) -> None:
        self.running, self.turns = running, turns
        names = ", ".join(f"{t.turn_id} ({t.ctx.question[:40]!r})" for t in running)
        super().__init__(
            f"{plural(len(running), 'turn', 'turns')} still running after {timeout:g} s: {names}. "
            "Wait longer (wait_for_turns(timeout=...)) or stop them with the Stop button."
        )


def _owner_label(store: Store, owner: str | None) -> str:
    for row in store.owners():
        if row.id == owner:
            return row.label
    return ""


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _let_go(turn: Turn) -> None:
    """A finished turn keeps what ``wait_for_turns`` shows (status, answer, trace), not its
    events, prompt blocks or tools' deps (issue 28: every turn kept them, +31 kB of kernel RSS
    a turn). Runs once the turn's task is done, so every view has read ``done``; the events
    are read back from the store after (``events_of``, ``subscribe``)."""
    if turn.log.retire():
        turn.ctx.system_blocks, turn.ctx.context = [], []
        turn.deps = _no_deps()


@functools.cache
def _no_deps() -> ToolDeps:
    """One empty ``ToolDeps`` for every finished turn, not an object each."""
    from deeptutor_jupyter.tools.base import ToolDeps

    return ToolDeps()
