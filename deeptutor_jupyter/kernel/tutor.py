"""The tutor's state inside one kernel: the notebook's session, its history, running turns.

The magic stays thin; this object owns what lives as long as the kernel: the store connection,
the orchestrator, the models (each with the degradations learned for it), and which cell runs which
turn so that re-running a cell replaces its turn.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator
    from deeptutor_jupyter.kernel.widgets.turn_view import TurnView
    from deeptutor_jupyter.memory import MemoryStore
    from deeptutor_jupyter.providers.base import ChatModel
    from deeptutor_jupyter.runtime.events import EventLog
    from deeptutor_jupyter.runtime.orchestrator import Orchestrator, Turn
    from deeptutor_jupyter.store.db import Store


def notebook_key(user_ns: dict[str, Any] | None = None) -> str:
    """The notebook this kernel serves; the server tells kernels it starts via JPY_SESSION_NAME."""
    name = os.environ.get("JPY_SESSION_NAME") or (user_ns or {}).get("__session__")
    if name:
        return str(name)
    return f"ipython:{os.getcwd()}"


def new_session_id(notebook: str) -> str:
    digest = hashlib.sha1(notebook.encode("utf-8")).hexdigest()[:10]
    return f"nb-{digest}-{uuid.uuid4().hex[:8]}"


@dataclass
class KernelTutor:
    notebook: str
    store: Store | None = None
    orchestrator: Orchestrator | None = None
    session_id: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)  # every turn this kernel started, in order
    cell_turns: dict[str, Turn] = field(default_factory=dict)
    models: dict[tuple[str, ...], ChatModel] = field(default_factory=dict)
    last_cell_id: str | None = None
    coordinator: InteractionCoordinator | None = None
    loop: asyncio.AbstractEventLoop | None = None
    language: str = "en"
    shell: Any = None
    memory: MemoryStore | None = None
    # Settings as the magic would resolve them (its traitlets included), given flags.
    resolve: Callable[[dict[str, Any]], ResolvedSettings] | None = None
    slots: dict[str, Any] = field(default_factory=dict)  # request id -> where a resumed turn shows
    logs: dict[str, EventLog] = field(default_factory=dict)  # event logs of running turns
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    loaded_tools: dict[str, set[str]] = field(default_factory=dict)  # session -> deferred loaded
    keys: set[str] = field(default_factory=set, repr=False)

    @property
    def workspace(self) -> Path:
        return Path.cwd()

    def secrets(self) -> list[str]:
        """The API keys this kernel's models use."""
        return [k for k in self.keys if k]

    def background(self, coro: Any) -> asyncio.Task[Any]:
        """Run work on the kernel loop without blocking the cell; keeps the task alive."""
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def turn_of(self, turn_id: str) -> Turn | None:
        return next((t for t in reversed(self.turns) if t.turn_id == turn_id), None)

    def track(self, turn: Turn, view: TurnView) -> None:
        self.turns.append(turn)
        view.start_ticker()

    def open(self, resolved: ResolvedSettings) -> None:
        """Open the store and find this notebook's conversation; only done on the first turn."""
        from deeptutor_jupyter.runtime.orchestrator import Orchestrator
        from deeptutor_jupyter.store.db import Store

        home = resolved.settings.home
        if self.store is None or self.store.path != home / "state.db":
            from deeptutor_jupyter.interaction.audit import AuditLog
            from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator
            from deeptutor_jupyter.kernel import interactions

            self.store = Store(home / "state.db")
            self.coordinator = InteractionCoordinator(
                self.store,
                AuditLog(home / "audit" / "interactions.jsonl"),
                workspace=Path.cwd(),
                expiry_seconds=resolved.settings.ask_timeout_hours * 3600,
            )
            self.coordinator.on_orphan = lambda row, result: interactions.resume_soon(
                self, row, result
            )
            self.coordinator.can_resume = lambda row: interactions.can_resume(self, row)
            self.orchestrator = Orchestrator(self.store, coordinator=self.coordinator)
            from deeptutor_jupyter.kernel.notebook_context import kernel_tools
            from deeptutor_jupyter.knowledge.tools import SearchKnowledgeTool
            from deeptutor_jupyter.memory import MemoryStore
            from deeptutor_jupyter.memory.tools import ReadMemoryTool, WriteMemoryTool
            from deeptutor_jupyter.skills import ReadSkillTool

            self.memory = MemoryStore(home)
            extra_tools = [
                *kernel_tools(self.shell),
                ReadMemoryTool(),
                WriteMemoryTool(),
                SearchKnowledgeTool(),
                ReadSkillTool(),
            ]
            for tool in extra_tools:
                self.orchestrator.registry.register(tool)
            self.loop = asyncio.get_running_loop() if has_event_loop() else None
            self.session_id = ""
        if not self.session_id:
            existing = self.store.latest_session(self.notebook)
            if existing:
                self.session_id = existing
                self.history = self.store.history(existing)
            else:
                self.new_session()

    def new_session(self) -> str:
        self.session_id = new_session_id(self.notebook)
        self.history = []
        if self.store is not None:
            self.store.ensure_session(self.session_id, self.notebook)
        return self.session_id

    def model_for(self, resolved: ResolvedSettings, *, cached: bool = True) -> ChatModel:
        """The model of these settings; cached models keep the degradations learned for them.

        ``cached=False`` gives a fresh one, for a caller whose event loop will not outlive it.
        """
        from deeptutor_jupyter.providers import make_model

        s = resolved.settings
        key = s.api_key.get_secret_value() if s.api_key is not None else None
        if key:
            self.keys.add(key)
        key_id = hashlib.sha256((key or "").encode()).hexdigest()[:12]
        timeouts = (s.timeout, s.connect_timeout, s.idle_timeout, s.turn_deadline, s.max_retry_wait)
        cache_key = (s.provider or "", s.model or "", s.base_url or "", key_id, str(timeouts))
        model = self.models.get(cache_key) if cached else None
        if model is None:
            model = make_model(
                provider=s.provider or "",
                model=s.model or "",
                base_url=s.base_url,
                api_key=key,
                timeout=s.timeout,
                connect_timeout=s.connect_timeout,
                idle_timeout=s.idle_timeout,
                turn_deadline=s.turn_deadline,
                max_retry_wait=s.max_retry_wait,
            )
            if cached:
                self.models[cache_key] = model
        return model

    def running_turns(self) -> list[Turn]:
        if self.orchestrator is None:
            return []
        return list(self.orchestrator.running.values())

    def cancel_cell(self, cell_id: str | None, reason: str) -> None:
        if cell_id and (turn := self.cell_turns.get(cell_id)) is not None:
            turn.cancel(reason)

    async def wait(self, timeout: float) -> list[Turn]:
        pending = [t.task for t in self.turns if t.task is not None and not t.task.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        return list(self.turns)

    def stop_soon(self, turn: Turn, reason: str) -> None:
        """Thread-safe: widget callbacks may run on a subshell thread."""
        if turn.task is None:
            return
        turn.task.get_loop().call_soon_threadsafe(turn.cancel, reason)


def has_event_loop() -> bool:
    """True in a kernel; False in a terminal IPython, where cells run without a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def ensure_loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError as exc:
        raise RuntimeError(
            "%tutor needs a running event loop: run it in a Jupyter kernel (ipykernel), "
            "not in a plain terminal IPython."
        ) from exc
