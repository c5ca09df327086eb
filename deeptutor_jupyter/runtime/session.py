"""``TutorSession``: the one entry every surface drives (cell, sidebar comm, terminal, hub, tests).

It owns what lives as long as the process serves one notebook: the store, the coordinator, the
learner's memory, the models (each with the degradations learned for it), the keys to redact,
the conversation and the tools loaded in it. A surface asks (``ask``), answers (``submit``),
lists (``pending``), stops (``stop``) and renders the events it subscribes to; it never runs a
loop of its own. Recording the trace and extending the history happen here, on ``done``, so every
surface gets the same trace for the same turn; so does starting the background consolidation of
the learner's memory (``runtime/upkeep.py``).
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.runtime import plan as turn_plan
from deeptutor_jupyter.runtime.upkeep import MemoryUpkeep

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings, Settings
    from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator, Result
    from deeptutor_jupyter.interaction.owners import Owner
    from deeptutor_jupyter.memory import MemoryStore
    from deeptutor_jupyter.messages import Message
    from deeptutor_jupyter.providers.base import ChatModel
    from deeptutor_jupyter.runtime.context import AttachedContext, ModelProfile
    from deeptutor_jupyter.runtime.events import Event, EventLog, Subscriber
    from deeptutor_jupyter.runtime.orchestrator import Orchestrator, Turn
    from deeptutor_jupyter.store.db import PendingRow, QuestionState, Store
    from deeptutor_jupyter.tools.base import Tool

WATCH_INTERVAL = 0.25  # seconds between looks for answers given in another process


@dataclass
class AskOptions:
    """How a surface wants a turn run, besides the question and the settings."""

    new: bool = False
    kbs: list[str] = field(default_factory=list)
    user_tools: tuple[str, ...] | None = None
    no_tools: bool = False
    attachments: list[Path] = field(default_factory=list)
    # Notebook context resolved by the surface (kernel/attachments.py): shown as tool cards.
    context: list[AttachedContext] = field(default_factory=list)
    cell_id: str | None = None
    # Where the turn shows, for a learner answering from elsewhere: {"notebook", "cell"}.
    place: dict[str, Any] | None = None
    # False where no form can be shown (a terminal): ask_user gets its degraded result.
    interactive: bool = True


def new_session_id(notebook: str) -> str:
    digest = hashlib.sha1(notebook.encode("utf-8")).hexdigest()[:10]
    return f"nb-{digest}-{uuid.uuid4().hex[:8]}"


def profile_of(s: Settings) -> ModelProfile:
    """The model a turn talks to, from the effective settings (never the key)."""
    from deeptutor_jupyter.runtime.context import ModelProfile

    return ModelProfile(
        provider=s.provider or "",
        model=s.model or "",
        base_url=s.base_url,
        max_rounds=s.max_rounds,
        max_tokens=s.max_tokens,
        temperature=s.temperature,
    )


class TutorSession:
    def __init__(
        self,
        notebook: str,
        *,
        resolve: Callable[[dict[str, Any]], ResolvedSettings],
        workspace: Callable[[], Path] = Path.cwd,
        tools: Callable[[], list[Tool[Any]]] = list,
        instructions: Callable[[Path], list[str]] | None = None,
        surface: str = "notebook",
    ) -> None:
        self.notebook = notebook
        self.resolve = resolve
        self.workspace = workspace
        self._tools = tools
        self._instructions = instructions or (lambda _root: [])
        self.surface = surface
        self.language = "en"
        self.store: Store | None = None
        self.coordinator: InteractionCoordinator | None = None
        self.orchestrator: Orchestrator | None = None
        self.memory: MemoryStore | None = None
        self.owner: Owner | None = None
        self.session_id = ""
        self.history: list[Message] = []
        self.turns: list[Turn] = []  # every turn this process started or resumed, in order
        self.models: dict[tuple[str, ...], ChatModel] = {}
        self.keys: set[str] = set()
        self.loaded_tools: dict[str, set[str]] = {}  # session id -> deferred tools loaded
        self.event_loop: asyncio.AbstractEventLoop | None = None
        # A surface hook: show a turn this process resumed for an answer given here.
        self.on_resumed: Callable[[Turn, PendingRow], None] | None = None
        # Where a turn shown by this process appears, for receipts elsewhere ({"notebook", "cell"}).
        self.place: Callable[[], dict[str, Any]] = lambda: {"notebook": Path(notebook).name}
        self._watcher: asyncio.Task[None] | None = None
        # Cards of questions whose turn runs elsewhere: request id -> what to tell them.
        self._watched: dict[str, Callable[[QuestionState], bool]] = {}
        self._watched_version = -1
        # L2/L3 consolidation in a background thread after turns (runtime/upkeep.py).
        self.upkeep = MemoryUpkeep(self)

    # opening -----------------------------------------------------------------------------
    @property
    def home(self) -> Path | None:
        return self.store.path.parent if self.store is not None else None

    def open(self, resolved: ResolvedSettings) -> None:
        """Open the store and find this notebook's conversation; cheap once opened."""
        from deeptutor_jupyter.store.db import Store

        home = resolved.settings.home
        self.language = resolved.settings.language
        if self.store is None or self.store.path != home / "state.db":
            from deeptutor_jupyter.interaction.audit import AuditLog
            from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator
            from deeptutor_jupyter.interaction.owners import Owner, register
            from deeptutor_jupyter.memory import MemoryStore
            from deeptutor_jupyter.runtime.orchestrator import Orchestrator

            self.store = Store(home / "state.db")
            self.owner = Owner.this_process(self.notebook)
            self.coordinator = InteractionCoordinator(
                self.store,
                AuditLog(home / "audit" / "interactions.jsonl"),
                workspace=self.workspace(),
                expiry_seconds=resolved.settings.ask_timeout_hours * 3600,
                owner=self.owner,
            )
            self.coordinator.on_orphan = self._orphan_answered
            self.coordinator.can_resume = self.can_resume
            self.orchestrator = Orchestrator(self.store, coordinator=self.coordinator)
            for tool in (*self._tools(), *turn_plan.runtime_tools()):
                self.orchestrator.registry.register(tool)
            self.memory = MemoryStore(home)
            self.event_loop = _running_loop()
            self.session_id = ""
            register(self.store, self.owner)
            self.housekeeping()
        if not self.session_id:
            existing = self.store.latest_session(self.notebook)
            if existing:
                self.session_id = existing
                self.history = self.store.history(existing)
            else:
                self.new_conversation()

    def housekeeping(self) -> None:
        """What a semester of use needs at each start: turns killed mid-flight are marked
        ``interrupted``, and questions whose resumed turn died before its next checkpoint are
        answerable again (their answer kept). Both are O(what is running or pending)."""
        from deeptutor_jupyter.interaction.owners import live_owner_ids

        assert self.store is not None
        try:
            live = live_owner_ids(self.store)
            self.store.interrupt_orphaned_turns(live)
            self.store.reopen_unfinished(live)
        except Exception:  # a read-only store still serves reads; the next start tries again
            pass

    def new_conversation(self) -> str:
        self.session_id = new_session_id(self.notebook)
        self.history = []
        if self.store is not None:
            self.store.ensure_session(self.session_id, self.notebook)
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
        return [k for k in self.keys if k]

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
        from deeptutor_jupyter.runtime.compaction import compact_history
        from deeptutor_jupyter.runtime.context import TurnContext
        from deeptutor_jupyter.runtime.events import EventLog

        opts = options or AskOptions()
        s = resolved.settings
        self.open(resolved)
        if opts.new:
            self.new_conversation()
        assert self.orchestrator is not None and self.store is not None
        self.store.ensure_session(self.session_id, self.notebook)
        model = model or self.model_for(resolved)  # first: it registers the key to redact
        plan = turn_plan.plan_turn(
            self,
            s,
            kbs=opts.kbs,
            user_tools=opts.user_tools,
            no_tools=opts.no_tools,
            instructions=self._instructions(self.workspace()),
        )
        # A long conversation is summarised before it outgrows the model's context.
        self.history, compaction = compact_history(self.history, s.context_budget)
        ctx = TurnContext(
            session_id=self.session_id,
            turn_id=f"turn-{uuid.uuid4().hex[:12]}",
            question=question,
            profile=profile_of(s),
            history=self.history,
            cell_id=opts.cell_id,
            language=s.language,
            system_blocks=plan.system_blocks,
            enabled_tools=plan.enabled_tools,
            attachments=[str(p.resolve()) for p in opts.attachments],
            context=opts.context,
            # a resumed turn selects the same knowledge bases and shows in the same place
            metadata={"kbs": opts.kbs, "place": opts.place or self.place()},
        )
        log = EventLog(ctx.turn_id, self.store)
        self._follow(log)
        turn = self.orchestrator.start_turn(
            ctx, model, log, plan.deps, interactive=opts.interactive, owner=self._owner_id()
        )
        self._track(turn)
        if compaction is not None:
            log.emit("notice", text=compaction.notice, stage="compacted")
        return turn

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
            turn.task.add_done_callback(lambda _t: self._maybe_stop_watching())
        self._watch()

    def _follow(self, log: EventLog) -> None:
        """The runtime's own subscriber: trace and history on ``done``, before any view."""

        def on_event(event: Event) -> None:
            if event.type != "done":
                return
            turn = self.turn_of(log.turn_id)
            if turn is None:
                return
            turn.trace = turn_plan.record_trace(self, turn, log)
            if self.session_id == turn.ctx.session_id and turn.messages:
                self.history.extend(turn.messages)
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
        from deeptutor_jupyter.interaction.coordinator import StoreUnavailable
        from deeptutor_jupyter.store.db import StoreError

        assert self.coordinator is not None
        try:
            return self.coordinator.submit(
                session_id, request_id, selections, custom_input, cancelled
            )
        except StoreError as exc:
            if isinstance(exc, StoreUnavailable):
                raise
            raise StoreUnavailable(str(exc)) from exc

    def continues_in(self, request_id: str) -> dict[str, Any] | None:
        """Where the turn of an answered question goes on, when that is another process."""
        assert self.store is not None and self.coordinator is not None
        row = self.store.get_pending(request_id)
        if row is None or not self.coordinator.owner_elsewhere(row):
            return None
        return dict(row.place or {"notebook": _owner_label(self.store, row.owner)})

    def pending(self, all_sessions: bool = False) -> list[PendingRow]:
        """The questions waiting for this notebook (or every notebook); stale ones expire."""
        assert self.store is not None and self.coordinator is not None
        sessions = None if all_sessions else self.store.sessions_of(self.notebook)
        return self.coordinator.expire_stale(self.store.pending_for(sessions))

    def can_resume(self, row: PendingRow) -> bool:
        try:
            return self.saved_state(row) is not None
        except Exception:  # a damaged state is a state that cannot be restored
            return False

    def saved_state(self, row: PendingRow) -> dict[str, Any] | None:
        """The paused turn of this question if this process can continue it, else None."""
        from deeptutor_jupyter.runtime.orchestrator import STATE_VERSION

        assert self.store is not None and self.orchestrator is not None
        saved = self.store.turn_state(row.request_id)
        if not saved or saved.get("version") != STATE_VERSION:
            return None
        context, loop_state = saved.get("context") or {}, saved.get("loop") or {}
        if context.get("capability") != "chat":
            return None
        if (loop_state.get("current_call") or {}).get("id") != row.tool_call_id:
            return None
        wanted = context.get("enabled_tools")
        if wanted and any(self.orchestrator.registry.get(n) is None for n in wanted):
            return None
        if not self.resolve(_profile_flags(context)).ready:
            return None
        return saved

    def _orphan_answered(self, row: PendingRow, result: Result) -> None:
        """Called by the coordinator, maybe on a subshell thread: resume on the loop."""
        loop = self.event_loop or _running_loop()
        assert loop is not None, "an orphaned question is only resumed where a loop runs"
        loop.call_soon_threadsafe(self.resume, row, result)

    def resume(self, row: PendingRow, result: Result) -> Turn | None:
        """Continue here the saved turn of a question whose owner is gone, with its answer."""
        from deeptutor_jupyter.interaction.coordinator import tool_result_of
        from deeptutor_jupyter.runtime.events import EventLog

        assert self.store is not None and self.orchestrator is not None
        saved = self.saved_state(row)
        if saved is None:
            return None  # submit() checked can_resume first; only if settings changed since
        resolved = self.resolve(_profile_flags(saved["context"]))
        model = self.model_for(resolved)
        self.store.claim_pending(row.request_id, self._owner_id() or "", self.place())
        log = EventLog(row.turn_id, self.store, start_seq=self.store.last_seq(row.turn_id))
        self._follow(log)
        deps = turn_plan.resume_deps(self, resolved.settings.home, saved["context"])
        turn = self.orchestrator.resume_turn(
            saved,
            tool_result_of(result),
            model,
            log,
            deps,
            resumed_from=row.request_id,
            owner=self._owner_id(),
        )
        self._track(turn)
        if self.on_resumed is not None:
            self.on_resumed(turn, row)
        return turn

    # stopping and following --------------------------------------------------------------
    def turn_of(self, turn_id: str) -> Turn | None:
        return next((t for t in reversed(self.turns) if t.turn_id == turn_id), None)

    def running_turns(self) -> list[Turn]:
        if self.orchestrator is None:
            return []
        return list(self.orchestrator.running.values())

    def stop(self, turn_id: str, reason: str = "") -> bool:
        """Thread-safe: widget callbacks may run on a subshell thread."""
        turn = self.turn_of(turn_id)
        if turn is None or turn.task is None or turn.task.done():
            return False
        turn.task.get_loop().call_soon_threadsafe(turn.cancel, reason)
        return True

    def subscribe(self, turn_id: str, subscriber: Subscriber, after_seq: int = 0) -> bool:
        """Events of a turn after ``after_seq``: live when it runs here, else replayed from the
        store. Returns True when the subscription stays live."""
        from deeptutor_jupyter.runtime.events import Event

        turn = self.turn_of(turn_id)
        if turn is not None and turn.task is not None and not turn.task.done():
            turn.log.subscribe(subscriber, after_seq)
            return True
        if self.store is None:
            return False
        for seq, kind, data, ts in self.store.events_with_time(turn_id, after_seq):
            subscriber(Event(kind, seq, turn_id, data, ts))  # type: ignore[arg-type]
        return False

    def events_of(self, turn: Turn) -> list[Event]:
        """Every event of a turn, those saved before a resume in another process included."""
        from deeptutor_jupyter.runtime.events import Event

        first = turn.log.events[0].seq if turn.log.events else turn.log.start_seq + 1
        if first <= 1 or self.store is None:
            return list(turn.log.events)
        saved = [
            Event(kind, seq, turn.turn_id, data, ts)  # type: ignore[arg-type]
            for seq, kind, data, ts in self.store.events_with_time(turn.turn_id)
            if seq < first
        ]
        return [*saved, *turn.log.events]

    async def wait(self, timeout: float) -> list[Turn]:
        pending = [t.task for t in self.turns if t.task is not None and not t.task.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        return list(self.turns)

    # the watcher: heartbeat and answers from elsewhere, only while turns run ------------------
    def _watch(self) -> None:
        if self._watcher is not None and not self._watcher.done():
            return
        loop = _running_loop()
        if loop is None:
            return
        self._watcher = loop.create_task(self._watch_loop())

    def watch_question(self, request_id: str, update: Callable[[QuestionState], bool]) -> None:
        """Tell ``update`` how a question whose turn runs elsewhere moves on (answered there,
        expired, its turn finished) until it returns True (nothing more to follow)."""
        self._watched[request_id] = update
        self._watched_version = -1  # look at once, then only when another process commits
        self._watch()

    def _poll_watched(self) -> None:
        assert self.store is not None
        version = self.store.data_version()
        if not self._watched or version == self._watched_version:
            return
        self._watched_version = version
        for request_id, state in self.store.question_states(list(self._watched)).items():
            update = self._watched.get(request_id)
            if update is not None and update(state):
                self._watched.pop(request_id, None)

    def _busy(self) -> bool:
        return bool(self.running_turns() or self._watched)

    def _maybe_stop_watching(self) -> None:
        if not self._busy() and self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None

    async def _watch_loop(self) -> None:
        from deeptutor_jupyter.interaction.owners import HEARTBEAT_SECONDS

        assert self.store is not None and self.coordinator is not None
        from deeptutor_jupyter.interaction.owners import register

        beat_due = 0.0
        loop = asyncio.get_running_loop()
        while self._busy():
            try:
                if loop.time() >= beat_due and self.owner is not None and self.running_turns():
                    register(self.store, self.owner)  # a fresh row even if it was tidied away
                    beat_due = loop.time() + HEARTBEAT_SECONDS
                self.coordinator.poll_remote()
                self._poll_watched()
            except Exception:  # a locked or full store: look again next time
                pass
            await asyncio.sleep(WATCH_INTERVAL)


def _owner_label(store: Store, owner: str | None) -> str:
    for row in store.owners():
        if row.id == owner:
            return row.label
    return ""


def _profile_flags(context: dict[str, Any]) -> dict[str, Any]:
    profile = context.get("profile") or {}
    return {k: profile.get(k) for k in ("provider", "model", "base_url")}


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
