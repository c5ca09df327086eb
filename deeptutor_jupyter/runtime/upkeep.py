"""Background consolidation: L2 (per surface) and L3/profile kept current after turns.

After each turn's trace is written, ``MemoryUpkeep.after_turn`` starts one daemon thread (unless
one runs already) with its own event loop and its own HTTP client, so neither the turn nor the
kernel ever waits for it. The thread reads the learner's configured settings (no cell's flags),
and for each document with at least ``consolidate_every`` traces it has not seen, runs an
``update`` consolidation with the configured model. ``update`` records the traces each answered
chunk consumed in ``state.json``, so a second run over the same traces asks nothing and changes
nothing.

Every run that had work is appended to ``memory/consolidation.jsonl`` (``memory/runs.py``):
what it consumed, what it applied, what failed. A failure (no model, a provider error, a reply
that is not ``{"ops": [...]}``) leaves the traces unseen, so nothing is lost; the workbench
shows it, the learner's cell never does. After a failure the document waits for another
``consolidate_every`` traces before it is tried again, so a broken model is not asked after
every turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.memory import MemoryStore
    from deeptutor_jupyter.memory.runs import DocumentRun, RunLog, RunRecord
    from deeptutor_jupyter.providers.base import ChatModel

L3_TARGETS = ("profile",)
_UNREADABLE_REPLY = frozenset({"reply"})  # how consolidate reports a reply it could not read


def due_documents(store: MemoryStore, every: int, log: RunLog) -> list[tuple[str, str, int]]:
    """(layer, key, unseen traces) of each document whose turn has come."""
    records = store.traces()
    targets = [("L2", s) for s in sorted({r.surface for r in records})]
    targets += [("L3", key) for key in L3_TARGETS]
    due = []
    for layer, key in targets:
        seen = store.seen_traces(layer, key)
        unseen = sum(
            1 for r in records if r.trace_id not in seen and (layer == "L3" or r.surface == key)
        )
        wanted = every
        last = log.last_for(f"{layer}/{key}.md")
        if last is not None and last.status == "failed":
            wanted = last.unseen + every  # back off: a broken model is not asked every turn
        if unseen >= wanted:
            due.append((layer, key, unseen))
    return due


class UpkeepSource(Protocol):
    """What the upkeep needs of its session (``TutorSession``, which imports this module)."""

    memory: MemoryStore | None

    def resolve(self, flags: dict[str, Any]) -> ResolvedSettings: ...

    def model_for(self, resolved: ResolvedSettings, *, cached: bool = True) -> ChatModel: ...

    def secrets(self) -> list[str]: ...


class MemoryUpkeep:
    """One per session: at most one background run at a time in this process."""

    def __init__(self, session: UpkeepSource) -> None:
        self.session = session
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None
        self._again = False

    def after_turn(self) -> None:
        """Cheap and non-blocking: starts the thread, or asks the running one to look again."""
        memory = self.session.memory
        if memory is None:
            return
        with self._guard:
            if self._thread is not None and self._thread.is_alive():
                self._again = True
                return
            self._again = False
            self._thread = threading.Thread(
                target=self._main, args=(memory,), name="deeptutor-memory-upkeep", daemon=True
            )
            self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the running upkeep (tests, a terminal about to exit); True when none runs."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def _main(self, memory: MemoryStore) -> None:
        while True:
            # run_once records what it can; a thread must not die loudly.
            with contextlib.suppress(Exception):
                asyncio.run(self.run_once(memory))
            with self._guard:
                if not self._again:
                    return
                self._again = False

    async def run_once(self, memory: MemoryStore) -> RunRecord | None:
        """Consolidate every due document; the run's record, or None when nothing was due."""
        from deeptutor_jupyter.memory.runs import DocumentRun, RunLog, RunRecord

        resolved = self.session.resolve({})
        s = resolved.settings
        if not s.auto_consolidate:
            return None
        log = RunLog(memory.root)
        due = due_documents(memory, s.consolidate_every, log)
        if not due:
            return None
        record = RunRecord(at=time.time(), trigger="auto", model=_label(resolved))
        if not resolved.ready:
            record.error = "no model is configured: " + "; ".join(resolved.missing())
            record.documents = [
                DocumentRun(f"{layer}/{key}.md", "failed", unseen=n, error=record.error)
                for layer, key, n in due
            ]
            log.append(record)
            return record
        model = self.session.model_for(resolved, cached=False)  # its client lives on this loop
        try:
            for layer, key, unseen in due:
                record.documents.append(await self._one(memory, model, layer, key, unseen))
        finally:
            await model.aclose()
        log.append(record)
        return record

    async def _one(
        self, memory: MemoryStore, model: ChatModel, layer: str, key: str, unseen: int
    ) -> DocumentRun:
        from deeptutor_jupyter.memory.consolidate import RunBusyError, consolidate
        from deeptutor_jupyter.memory.runs import DocumentRun, op_summary
        from deeptutor_jupyter.redact import scrub_text, usable

        doc = DocumentRun(f"{layer}/{key}.md", unseen=unseen)
        before = memory.seen_traces(layer, key)
        try:
            result = await consolidate(memory, model, layer=layer, key=key, mode="update")
        except RunBusyError:
            doc.status = "busy"  # another kernel is on it; its run consumes these traces
        except Exception as exc:
            doc.status = "failed"
            reason = f"{type(exc).__name__}: {exc}"
            doc.error = scrub_text(reason, usable(self.session.secrets()))
        else:
            doc.ops = [op_summary(op) for op in result.ops_applied]
            doc.rejected = len(result.rejected)
            unread = sum(1 for op, _ in result.rejected if set(op) == _UNREADABLE_REPLY)
            if unread:
                doc.status = "failed"
                doc.error = (
                    f'{unread} of {result.passes} model replies were not JSON {{"ops": [...]}}; '
                    "their traces stay unread and are offered again"
                )
        doc.consumed = sorted(memory.seen_traces(layer, key) - before)
        return doc


def _label(resolved: ResolvedSettings) -> str:
    s = resolved.settings
    return f"{s.provider}/{s.model}" if s.provider and s.model else ""
