"""Consolidation: turn L1 traces into L2/L3 lines, and keep those lines honest.

Four modes, one contract: the model only ever proposes ``{"ops": [...]}`` (see ``ops``), the
store validates each op and applies the valid ones atomically, and every rejected op comes back
with its reason. ``merge`` needs no model at all.

* ``update``: unseen traces go to the model in chunks with the current document; the trace ids
  of each answered chunk are remembered in ``memory/state.json``, so the next run sends only
  new traces.
* ``audit``: entries, in chunks, with the traces they cite; the model edits or deletes lines
  their evidence does not support.
* ``dedup``: the whole line view; the model merges lines that say the same thing. At most three
  passes, stopping as soon as a pass changes nothing.
* ``merge``: deterministic; entries with the same normalised text become one entry citing the
  union of their references, and the footnotes are rewritten in canonical form.

One run per document at a time (a non-blocking ``flock``), and ``preferences.md`` is never
consolidated: it holds what the learner asked for, which no summary may rewrite.
"""

from __future__ import annotations

import contextlib
import json
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.memory.document import Document, line_view, normalise, parse
from deeptutor_jupyter.memory.ops import OpsPreview, plan, unified_diff
from deeptutor_jupyter.memory.prompts import mode_prompt, trace_lines
from deeptutor_jupyter.memory.store import MemoryStore, StaleDocumentError
from deeptutor_jupyter.memory.trace import TraceRecord, not_replaced
from deeptutor_jupyter.providers.base import ChatModel, ChatRequest, TextDelta

Mode = Literal["update", "audit", "dedup", "merge"]
MODES: tuple[Mode, ...] = typing.get_args(Mode)
TRACE_CHUNK = 20
AUDIT_CHUNK = 30
DEDUP_PASSES = 3


class RunBusyError(DeepTutorError, RuntimeError):
    code = "busy"

    """Another consolidation of the same document is running (in this or another process)."""


@dataclass
class ConsolidationResult:
    mode: str
    ops_applied: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    passes: int = 0
    diff: str = ""
    traces_seen: int = 0


async def consolidate(
    store: MemoryStore,
    model: ChatModel | None,
    *,
    layer: str,
    key: str,
    mode: Mode,
    apply: bool = True,
) -> ConsolidationResult:
    """Run one mode on one document; with ``apply=False`` nothing is written (a preview)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; not {mode!r}")
    if layer == "L3" and key == "preferences":
        raise ValueError("preferences.md is not auto-consolidated; edit it in the workbench")
    store.path(layer, key)  # validates layer and key before any lock is taken
    if mode != "merge" and model is None:
        raise ValueError(f"mode {mode!r} needs a model")
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(store.run_lock(layer, key))
        except BlockingIOError:
            raise RunBusyError(
                f"A consolidation of {layer}/{key}.md is already running; try again when it ends."
            ) from None
        run = _Run(store, layer, key, apply, ConsolidationResult(mode))
        if mode == "merge":
            run.step(_merge_ops(run.doc()))
            run.result.passes = 1
        else:
            assert model is not None
            await _MODES[mode](run, model)
        run.result.diff = unified_diff(run.initial, run.text, f"{layer}/{key}.md")
        return run.result


class _Run:
    """The document being consolidated: on disk (``apply``) or in memory (a preview)."""

    def __init__(
        self, store: MemoryStore, layer: str, key: str, apply: bool, result: ConsolidationResult
    ) -> None:
        self.store, self.layer, self.key, self.apply = store, layer, key, apply
        self.result = result
        self.initial = self.text = store.read_text(layer, key)

    def doc(self) -> Document:
        return parse(self.text)

    def step(self, ops: list[Any]) -> OpsPreview:
        if self.apply:
            preview = self.store.apply_ops(self.layer, self.key, ops)
        else:
            name = f"{self.layer}/{self.key}.md"
            known = self.store.known_trace_ids()
            preview = plan(self.doc(), ops, known, before=self.text, name=name)[1]
        self.text = preview.after
        self.result.ops_applied += preview.valid
        self.result.rejected += preview.rejected
        return preview

    def traces(self) -> list[TraceRecord]:
        surface = self.key if self.layer == "L2" else None
        return self.store.traces(surface)


async def _update(run: _Run, model: ChatModel) -> None:
    seen = run.store.seen_traces(run.layer, run.key)
    fresh = [r for r in not_replaced(run.traces()) if r.trace_id not in seen]
    for start in range(0, len(fresh), TRACE_CHUNK):
        chunk = fresh[start : start + TRACE_CHUNK]
        user = (
            f"Current document ({run.layer}/{run.key}.md):\n{line_view(run.doc())}\n\n"
            f"New traces (one JSON object a line):\n{trace_lines(chunk)}"
        )
        ops = await _ask(run, model, user)
        if ops is None:
            continue  # not marked seen: the next run offers these traces again
        run.step(ops)
        run.result.traces_seen += len(chunk)
        if run.apply:
            run.store.mark_seen(run.layer, run.key, [r.trace_id for r in chunk])


async def _audit(run: _Run, model: ChatModel) -> None:
    evidence = {record.trace_id: record for record in run.traces()}
    entries = run.doc().entries()
    for start in range(0, len(entries), AUDIT_CHUNK):
        # Entries are looked up again by id: earlier chunks may have edited the document.
        doc = run.doc()
        ids = [entry.id for _, entry in entries[start : start + AUDIT_CHUNK]]
        current = [found for found in map(doc.find, ids) if found is not None]
        cited = {ref for _, entry in current for ref in entry.refs}
        lines = line_view(current)
        known = [evidence[ref] for ref in sorted(cited) if ref in evidence]
        user = f"Entries to audit:\n{lines}\n\nTheir evidence:\n{trace_lines(known) or '(none)'}"
        ops = await _ask(run, model, user)
        if ops is not None:
            run.step(ops)


async def _dedup(run: _Run, model: ChatModel) -> None:
    for _ in range(DEDUP_PASSES):
        user = f"Document ({run.layer}/{run.key}.md):\n{line_view(run.doc())}"
        ops = await _ask(run, model, user)
        if not ops:
            return
        before = run.text
        if not run.step(ops).valid or run.text == before:
            return


_MODES = {"update": _update, "audit": _audit, "dedup": _dedup}


def _merge_ops(doc: Document) -> list[dict[str, Any]]:
    """Collapse entries with the same normalised text into the first one, refs united."""
    first: dict[str, Any] = {}
    refs: dict[str, list[str]] = {}
    dropped: list[str] = []
    for _, entry in doc.entries():
        norm = normalise(entry.text)
        if norm not in first:
            first[norm], refs[norm] = entry, list(entry.refs)
            continue
        refs[norm] += [ref for ref in entry.refs if ref not in refs[norm]]
        dropped.append(entry.id)
    ops: list[dict[str, Any]] = []
    for norm, keeper in first.items():
        if refs[norm] != keeper.refs:
            ops.append({"op": "edit", "id": keeper.id, "text": keeper.text, "refs": refs[norm]})
    ops += [{"op": "delete", "id": entry_id, "reason": "superseded"} for entry_id in dropped]
    return ops


_THINK_RE = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)


async def _ask(run: _Run, model: ChatModel, user: str) -> list[Any] | None:
    """The model's ops, or None (recorded as a rejection) when the reply is not ``{"ops": []}``."""
    system = mode_prompt(run.result.mode, run.layer, run.key)
    request = ChatRequest(
        model=model.model,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        temperature=0.0,
    )
    parts = [event.text async for event in model.stream(request) if isinstance(event, TextDelta)]
    run.result.passes += 1
    reply = "".join(parts)
    ops = parse_ops_reply(reply)
    if ops is None:
        run.result.rejected.append(({"reply": reply[:200]}, 'reply is not JSON {"ops": [...]}'))
    return ops


def parse_ops_reply(reply: str) -> list[Any] | None:
    """The ``ops`` list of a reply, tolerating code fences, think blocks and chatter around it."""
    text = _THINK_RE.sub("", reply)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    ops = value.get("ops") if isinstance(value, dict) else None
    return ops if isinstance(ops, list) else None


_UNREADABLE_REPLY = frozenset({"reply"})  # the shape ``_ask`` records for an unparseable reply


def covers_unseen(mode: str, unseen: list[str], result: ConsolidationResult) -> bool:
    """An ``update`` preview whose every chunk was answered covered exactly ``unseen``: applying
    it may mark those traces seen, as the real run would have done."""
    answered = not any(set(op) == _UNREADABLE_REPLY for op, _ in result.rejected)
    return mode == "update" and bool(unseen) and answered and result.traces_seen == len(unseen)


@dataclass
class Preview:
    """A finished ``apply=False`` run: the text it proposes, and what Apply needs to write it.

    ``unseen`` are the traces an ``update`` drew from (offered to the model); they are marked
    seen on Apply only when every chunk was answered, as a real run would have done.
    """

    layer: str
    key: str
    mode: str
    before: str
    result: ConsolidationResult
    after: str
    unseen: list[str] = field(default_factory=list)

    def marks_seen(self) -> bool:
        return covers_unseen(self.mode, self.unseen, self.result)

    def has_work(self) -> bool:
        return self.after != self.before or self.marks_seen()

    def trace_ids(self) -> list[str]:
        """The traces the proposal draws from: those offered to the model, then those cited."""
        cited = [
            ref
            for op in self.result.ops_applied
            if op.get("op") in ("add", "edit")
            for ref in op.get("refs", [])
        ]
        offered = self.unseen if self.mode == "update" else []
        return list(dict.fromkeys([*offered, *cited]))


async def preview(
    store: MemoryStore, model: ChatModel | None, *, layer: str, key: str, mode: Mode
) -> Preview:
    """What ``consolidate`` would change, computed without writing anything."""
    before = store.read_text(layer, key)
    unseen: list[str] = []
    if mode == "update":
        seen = store.seen_traces(layer, key)
        surface = key if layer == "L2" else None
        unseen = [r.trace_id for r in not_replaced(store.traces(surface)) if r.trace_id not in seen]
    result = await consolidate(store, model, layer=layer, key=key, mode=mode, apply=False)
    after = before if not result.ops_applied else _after(store, layer, key, before, result)
    return Preview(layer, key, mode, before, result, after, unseen)


def _after(
    store: MemoryStore, layer: str, key: str, before: str, result: ConsolidationResult
) -> str:
    # The valid ops replayed on the base: the text Apply will write, byte for byte.
    ops: list[dict[str, Any]] = result.ops_applied
    name = f"{layer}/{key}.md"
    return plan(parse(before), ops, store.known_trace_ids(), before=before, name=name)[1].after


def apply_preview(store: MemoryStore, shown: Preview) -> OpsPreview:
    """Write exactly what ``shown`` proposed: no model call, the same ops on the same base.

    ``StaleDocumentError`` when the document changed since the preview (nothing is written),
    ``RunBusyError`` while a consolidation of it runs.
    """
    layer, key = shown.layer, shown.key
    applied = OpsPreview(before=shown.before, after=shown.before)
    try:
        with store.run_lock(layer, key):
            if shown.result.ops_applied:
                applied = store.apply_ops(
                    layer, key, shown.result.ops_applied, base=shown.before, expect=shown.after
                )
            elif store.read_text(layer, key) != shown.before:
                raise StaleDocumentError(
                    f"{layer}/{key}.md changed since the preview was made; nothing was written. "
                    "Make a new preview."
                )
            if shown.marks_seen():
                store.mark_seen(layer, key, shown.unseen)
    except BlockingIOError:
        raise RunBusyError(
            f"A consolidation of {layer}/{key}.md is running; try again when it ends."
        ) from None
    return applied
