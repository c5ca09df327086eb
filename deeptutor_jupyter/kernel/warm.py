"""Importing what the first turn needs while the learner types it.

``%load_ext`` stays light (it imports none of httpx, pydantic or ipywidgets). Once its cell has
finished, a daemon thread imports the modules a first ``%tutor`` would otherwise import itself
(about 250 ms here: ipywidgets, httpx and its SSL context, pydantic and our event and tool
models), so that a question typed a moment later starts as fast as the second one does.

Why a thread is safe here:

* ``%tutor`` (and the sidebar, and the public functions) call ``wait()`` before importing
  anything heavy: a question that arrives while warming waits for it instead of importing the
  same modules at the same time. Waiting holds no import lock, so it cannot deadlock with the
  thread; it gives up after ``WAIT_LIMIT`` seconds and imports itself.
* It waits for the modules its model request needs only (``REQUEST_MODULES``), not for the
  view's (``VIEW_MODULES``, ipywidgets): a first turn sends its request first and builds its
  view while the model thinks (kernel/start.py), so a Run All's question leaves sooner.
* The thread only imports and builds pure values (pydantic schemas, an SSL context). Widgets,
  comms and anything that touches the kernel loop are created on the main thread, by the turn.
* A failure is swallowed: the turn then imports on the main thread and reports the real error.
* The cyclic garbage collector is off while it imports what a request needs (each collection
  would traverse the new modules' objects again), and on again when that is done or, when a
  question waited for it, once that question's request is sent (``request_sent``); at most
  ``GC_PAUSE_LIMIT`` seconds after the imports whatever happens. Reference counting frees
  everything else as usual meanwhile.

Python's per-module import locks let the learner's own cells import other modules meanwhile;
only a cell importing one of these very modules waits for the thread to finish that module.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from deeptutor_jupyter.tools.base import Tool

__all__ = [
    "MODULES",
    "REQUEST_MODULES",
    "VIEW_MODULES",
    "Warmer",
    "finished",
    "start",
    "wait",
    "warming",
]

# What a first turn imports (the kernel test ``test_first_turn_imports_nothing_after_warming``
# fails when a new import is missing here), in two stages. First what its model request needs,
# the slow third-party packages first: a question waits for these only.
REQUEST_MODULES = (
    "deeptutor_jupyter.providers",  # first: it keeps httpx from importing its CLI for nothing
    "httpx",
    "httpcore",  # what httpx imports on its first request, not at its own import
    "h11",
    "anyio._backends._asyncio",
    "sniffio",
    "pydantic",
    "pydantic._internal._dataclasses",
    "deeptutor_jupyter.config",
    "deeptutor_jupyter.kernel.start",
    "deeptutor_jupyter.kernel.notebook_context",
    "deeptutor_jupyter.tools.light",  # the cells, book and solve tools stand in (not imported)
    # Every session reads settings.toml's MCP servers (no SDK import until one is called).
    "deeptutor_jupyter.tools.mcp",
    "deeptutor_jupyter.tools.mcp.config",
    "deeptutor_jupyter.tools.mcp.connection",
    "deeptutor_jupyter.tools.mcp.servers",
    "deeptutor_jupyter.tools.mcp.tool",
    "deeptutor_jupyter.kernel.widgets.ask_user_strings",
    "deeptutor_jupyter.kernel.widgets.quiz_strings",
    "deeptutor_jupyter.kernel.widgets.forget_strings",
    "deeptutor_jupyter.kernel.widgets.memory_workbench_strings",
    "deeptutor_jupyter.kernel.widgets.setup_strings",
    "deeptutor_jupyter.agent.events",
    "deeptutor_jupyter.agent.loop",
    "deeptutor_jupyter.runtime.choice",  # the conversation's chosen model and knowledge bases
    "deeptutor_jupyter.runtime.compaction",
    "deeptutor_jupyter.runtime.context",
    "deeptutor_jupyter.runtime.course",
    "deeptutor_jupyter.runtime.course_files",
    "deeptutor_jupyter.runtime.events",
    "deeptutor_jupyter.runtime.home",
    "deeptutor_jupyter.runtime.learning",
    "deeptutor_jupyter.runtime.orchestrator",
    "deeptutor_jupyter.runtime.plan",
    "deeptutor_jupyter.runtime.policy_gate",
    "deeptutor_jupyter.learning.policy",
    "deeptutor_jupyter.runtime.watcher",
    "deeptutor_jupyter.store.db",
    "deeptutor_jupyter.store.event_rows",
    "deeptutor_jupyter.interaction.audit",
    "deeptutor_jupyter.interaction.coordinator",
    "deeptutor_jupyter.interaction.owners",
    "deeptutor_jupyter.interaction.quiz",
    "deeptutor_jupyter.memory",
    "deeptutor_jupyter.memory.tools",
    "deeptutor_jupyter.knowledge",
    "deeptutor_jupyter.knowledge.mount",
    "deeptutor_jupyter.knowledge.tools",
    "deeptutor_jupyter.skills",
    "deeptutor_jupyter.skills.tool",
    "deeptutor_jupyter.providers.openai_compat",
)
# Then the cell's view and the end of the turn: a first turn sends its request before it
# builds its view (kernel/start.py), so a question that arrives meanwhile does not wait for
# these; the thread stops before the next one and the turn imports the rest itself.
VIEW_MODULES = (
    "ipywidgets",
    "deeptutor_jupyter.kernel.widgets.quiz_card",  # the static rendering's quiz receipts
    "deeptutor_jupyter.kernel.widgets.turn_view",
    "anywidget",
    "deeptutor_jupyter.kernel.widgets.answer_stream",  # the answer's text (its first words)
    "deeptutor_jupyter.kernel.widgets.status_line",
    "deeptutor_jupyter.kernel.interactions",
    "deeptutor_jupyter.kernel.quiz_cards",
    "deeptutor_jupyter.kernel.release",
    "deeptutor_jupyter.kernel.turn_plan",
    "mistune",  # the finished turn's static HTML (kernel/display.py)
    "deeptutor_jupyter.memory.runs",  # the memory upkeep after the turn (runtime/upkeep.py)
    "deeptutor_jupyter.learning.path",  # a learner's path (and mastery), read when there is one
)
MODULES = REQUEST_MODULES + VIEW_MODULES

WAIT_LIMIT = 10.0  # seconds; far above the ~0.3 s warming takes on a busy machine
# Seconds the garbage collector stays paused for a question that waited and has not sent yet.
GC_PAUSE_LIMIT = 2.0
THREAD_NAME = "deeptutor-warm-imports"


class Warmer:
    """One warming: a thread that imports ``modules`` and builds the first turn's values."""

    def __init__(
        self, view: tuple[str, ...] = VIEW_MODULES, gc_pause: float = GC_PAUSE_LIMIT
    ) -> None:
        self._view = view  # of the modules given to ``start``, those imported second
        self._gc_pause = gc_pause
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._imported = threading.Event()  # set when the request's modules are done (or failed)
        self._idle = threading.Event()  # set when the thread has imported all it will
        self._finished = threading.Event()  # and has done all it will (the collector is on)
        # Set when a question waited for the imports: it then runs at once, and ``after`` is
        # left to it (it builds what it needs itself), not built beside it for the GIL.
        self._asked = threading.Event()
        # Set when a question is about to send: the view's modules are left to it too; it
        # imports them once its request is on the wire (issue 28: Run All's first turn).
        self._sending = threading.Event()
        # Set when that question's request is on the wire (``request_sent``): the cyclic
        # garbage collector, paused while the thread imports, runs again then.
        self._sent = threading.Event()
        self._gc_paused = False  # the thread turned the collector off, and it is still off

    def start(
        self, modules: tuple[str, ...] = MODULES, after: Callable[[], None] | None = None
    ) -> bool:
        """Start the thread, once; False when it was started before.

        ``after`` runs in the thread once the imports are done (``wait`` does not wait for
        it): slow values only needed later, such as the SSL context of an https model; not
        when a question already waited (Run All): it would only compete with that question
        for the interpreter (issue 28: "sent at once" cost more than no warming at all).
        """
        with self._lock:
            if self._thread is not None:
                return False
            self._thread = threading.Thread(
                target=self._run, args=(modules, after), name=THREAD_NAME, daemon=True
            )
            self._thread.start()
            return True

    def warming(self) -> bool:
        """True while the thread is still importing."""
        return self._thread is not None and not self._idle.is_set()

    def wait(self, timeout: float = WAIT_LIMIT, *, sending: bool = False) -> bool:
        """Block until the modules a model request needs are imported; True unless it gave up.
        Free once they are. ``sending``: the caller is a question about to send; the thread
        then stops before its next view module (the question imports the rest itself)."""
        thread = self._thread
        if thread is None or threading.current_thread() is thread:
            return True
        if sending:
            self._sending.set()
        if self._imported.is_set():
            return True
        self._asked.set()
        return self._imported.wait(timeout)

    def finished(self, timeout: float = WAIT_LIMIT) -> bool:
        """Block until the thread has imported everything it will (tests, benchmarks)."""
        return self._thread is None or self._finished.wait(timeout)

    def request_sent(self) -> None:
        """The question that waited has its request on the wire (kernel/start.py)."""
        self._sent.set()
        self._resume_gc()

    def _pause_gc(self) -> None:
        with self._lock:
            self._gc_paused = gc.isenabled()
            gc.disable()

    def _resume_gc(self) -> None:
        """On again, once, if the thread turned it off (not if it was off before)."""
        with self._lock:
            if self._gc_paused:
                self._gc_paused = False
                gc.enable()

    def _run(self, modules: tuple[str, ...], after: Callable[[], None] | None) -> None:
        first = tuple(m for m in modules if m not in self._view)
        then = tuple(m for m in modules if m in self._view)
        # No cyclic garbage collection while importing what a request needs: the objects an
        # import makes live as long as the process, and each collection traverses them again
        # (~11 ms of a Run All's first request in a kernel, issue 28). Back on when that is
        # done, or, when a question waited, once its request is on the wire.
        if first:
            self._pause_gc()
        try:
            try:
                _import_each(first, stop=None)
                if first:
                    _build_values()
            finally:
                if not self._asked.is_set():
                    self._resume_gc()
                self._imported.set()
            _import_each(then, stop=self._sending)
            if then and not self._sending.is_set():
                _build_later()
            if after is not None and not (self._asked.is_set() or self._sending.is_set()):
                with contextlib.suppress(Exception):  # the client builds it again if it needs it
                    after()
        finally:
            self._idle.set()
            if self._gc_paused:  # bounded: a question that never sends (no settings, an error)
                self._sent.wait(self._gc_pause)
                self._resume_gc()
            self._finished.set()


def _import_each(modules: tuple[str, ...], stop: threading.Event | None) -> None:
    for name in modules:
        if stop is not None and stop.is_set():
            return
        try:
            importlib.import_module(name)
        except Exception:  # the turn imports it again and says why
            continue


_WARMER = Warmer()  # one per process: the kernel's


def start(modules: tuple[str, ...] = MODULES, after: Callable[[], None] | None = None) -> bool:
    """Start this process's warming (see ``Warmer.start``); ``modules=()`` switches it off."""
    return _WARMER.start(modules, after)


def warming() -> bool:
    return _WARMER.warming()


def wait(timeout: float = WAIT_LIMIT, *, sending: bool = False) -> bool:
    """Block until this process's warming has imported what a model request needs (free when
    it has); see ``Warmer.wait``."""
    return _WARMER.wait(timeout, sending=sending)


def finished(timeout: float = WAIT_LIMIT) -> bool:
    """Block until this process's warming has imported everything it will."""
    return _WARMER.finished(timeout)


def request_sent() -> None:
    """A question that waited for this process's warming has its request on the wire."""
    _WARMER.request_sent()


# The models a first request builds (lazy_model.py: each is built on first use), as
# "module:name"; the kernel test ``test_after_warming_the_first_turn_imports_nothing_heavy``
# fails when one is missing here. The tools' argument models are built after it (_build_later).
REQUEST_MODELS = (
    "deeptutor_jupyter.config:Settings",
    "deeptutor_jupyter.runtime.context:ModelProfile",
    "deeptutor_jupyter.runtime.context:TurnContext",
    "deeptutor_jupyter.agent.events:TurnStarted",
    "deeptutor_jupyter.agent.events:RoundStarted",
)


def _build_values() -> None:
    """Values built on first use that cost as much as an import and a request needs: its models.
    The schemas of the tools a chat turn sends come with the package (tools/schema_file.py):
    read here, their argument models are built after the request (``_build_later``)."""
    with contextlib.suppress(Exception):  # the first turn builds them itself
        from deeptutor_jupyter.tools.schema_file import packaged

        for name in REQUEST_MODELS:
            module, _, model = name.partition(":")
            getattr(importlib.import_module(module), model).model_rebuild()
        packaged()


def _build_later() -> None:
    """What the rest of a turn builds on first use: the argument models of the tools a chat
    turn sends (validating a call), the validator of all events (a turn's row read back)."""
    with contextlib.suppress(Exception):  # built when first used
        from deeptutor_jupyter.agent.events import adapter

        for cls in sent_tools():
            cls.Args.model_rebuild()
        adapter()


def sent_tools() -> list[type[Tool[Any]]]:
    """Our tool classes whose schemas a chat turn sends (always, or with a knowledge base)."""
    from deeptutor_jupyter.knowledge.mount import CONDITIONAL_MOUNTS
    from deeptutor_jupyter.runtime.plan import ALWAYS
    from deeptutor_jupyter.tools.base import Tool

    sent = {*ALWAYS, *(tool for _flag, tool in CONDITIONAL_MOUNTS)}
    ours = [c for c in _concrete(Tool) if c.__module__.startswith("deeptutor_jupyter.")]
    return cast("list[type[Tool[Any]]]", [c for c in ours if getattr(c, "name", None) in sent])


def _concrete(base: type) -> list[type]:
    out: list[type] = []
    todo: list[type] = list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if not getattr(cls, "__abstractmethods__", None):
            out.append(cls)
    return out


if __name__ == "__main__":  # write tools/sent_schemas.json again (tools/schema_file.py)
    for _name in REQUEST_MODULES:
        importlib.import_module(_name)
    from deeptutor_jupyter.tools.schema_file import write

    print(write(sent_tools()))
