"""The Memory tab's writes: delete an entry or a document, and consolidate through a preview.

``POST memory/<layer>/<key>/preview`` runs one consolidation mode without writing and keeps the
result here, in the server process, under a fresh id. ``POST memory/previews/<id>`` writes
exactly that result (the same ops on the same base, no second model call); a document edited
since is refused with 409 ``stale`` and the preview is kept, so nothing is lost. ``DELETE`` on
the same address drops it.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from pydantic import ValidationError

from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.memory.consolidate import (
    MODES,
    Preview,
    RunBusyError,
    apply_preview,
    preview,
)
from deeptutor_jupyter.memory.document import bare_id, parse
from deeptutor_jupyter.memory.ops import DELETE_REASONS, unified_diff
from deeptutor_jupyter.memory.store import MemoryStore, StaleDocumentError
from deeptutor_jupyter.memory.trace import TraceRecord
from deeptutor_jupyter.providers.base import ChatModel
from deeptutor_jupyter.redact import scrub_text, usable
from deeptutor_jupyter.server.api_models import (
    ApplyReply,
    ConsolidationPreview,
    DiscardReply,
    DocumentsReply,
    PreviewChange,
    PreviewReply,
    PreviewRequest,
    PreviewTrace,
    RejectedOp,
    dump,
)
from deeptutor_jupyter.server.handlers import TutorHandler, learner
from deeptutor_jupyter.server.reads import memory_documents

PREVIEW_TTL = 3600.0  # seconds a preview may wait for Apply
MAX_PREVIEWS = 32  # a learner clicking Consolidate again and again keeps only the newest
DOC = r"(L2|L3)/([a-z][a-z0-9_-]{0,31})"


@dataclass
class Held:
    home: Path
    preview: Preview
    made_at: float


_previews: dict[str, Held] = {}
_lock = threading.Lock()


def _hold(home: Path, shown: Preview) -> str:
    now = time.monotonic()
    with _lock:
        for old in [k for k, h in _previews.items() if now - h.made_at > PREVIEW_TTL]:
            del _previews[old]
        while len(_previews) >= MAX_PREVIEWS:
            del _previews[min(_previews, key=lambda k: _previews[k].made_at)]
        preview_id = "pv_" + secrets.token_hex(8)
        _previews[preview_id] = Held(home, shown, now)
    return preview_id


def _held(preview_id: str, home: Path) -> Held | None:
    with _lock:
        held = _previews.get(preview_id)
    fresh = held is not None and time.monotonic() - held.made_at <= PREVIEW_TTL
    return held if fresh and held is not None and held.home == home else None


def _drop(preview_id: str) -> bool:
    with _lock:
        return _previews.pop(preview_id, None) is not None


def preview_json(preview_id: str, shown: Preview, store: MemoryStore) -> ConsolidationPreview:
    result = shown.result
    by_id = {r.trace_id: r for r in store.traces()}
    return ConsolidationPreview(
        id=preview_id,
        layer=shown.layer,
        key=shown.key,
        mode=shown.mode,
        before=shown.before,
        after=shown.after,
        changed=shown.after != shown.before,
        diff=unified_diff(shown.before, shown.after, f"{shown.layer}/{shown.key}.md"),
        has_work=shown.has_work(),
        ops=result.ops_applied,
        changes=changes(shown),
        rejected=[RejectedOp(op=op, reason=reason) for op, reason in result.rejected],
        traces=[_trace(trace_id, by_id.get(trace_id)) for trace_id in shown.trace_ids()],
    )


def changes(shown: Preview) -> list[PreviewChange]:
    """The valid ops in a learner's words: what is added, edited (from what) or deleted."""
    entries = {entry.id: (section.name, entry) for section, entry in parse(shown.before).entries()}
    out = []
    for op in shown.result.ops_applied:
        kind = str(op.get("op"))
        found = entries.get(bare_id(str(op.get("id", ""))))
        old = found[1].text if found else ""
        section = str(op.get("section") or (found[0] if found else ""))
        out.append(
            PreviewChange.model_validate(
                {
                    "kind": kind,
                    "section": section,
                    "text": str(op.get("text", old)),
                    "old_text": old if kind == "edit" else "",
                    "refs": list(op.get("refs", [])),
                    "reason": str(op.get("reason", "")),
                }
            )
        )
    return out


def _trace(trace_id: str, record: TraceRecord | None) -> PreviewTrace:
    if record is None:
        return PreviewTrace(trace_id=trace_id, question="", surface="", started_at=None)
    return PreviewTrace(
        trace_id=trace_id,
        question=record.question,
        surface=record.surface,
        started_at=record.started_at,
    )


def _model_for(mode: str) -> tuple[ChatModel | None, list[str]]:
    """The model of the learner's settings (as a kernel resolves them) and the secrets in it.

    ``LookupError`` says in words what is missing when a mode needs a model and none is set.
    """
    if mode == "merge":
        return None, []
    resolved = resolve_settings()
    if not resolved.ready:
        raise LookupError("Consolidation needs a model: " + "; ".join(resolved.missing()))
    from deeptutor_jupyter.providers import model_from_settings

    s = resolved.settings
    key = s.api_key.get_secret_value() if s.api_key is not None else None
    return model_from_settings(s), [key] if key else []


class MemoryEntryHandler(TutorHandler):
    """``DELETE memory/<layer>/<key>/m_<id>?reason=stale``: one entry, logged with its reason."""

    @tornado.web.authenticated
    @authorized
    def delete(self, layer: str, key: str, entry_id: str) -> None:
        reason = self.get_argument("reason", "stale")
        if reason not in DELETE_REASONS:
            choices = ", ".join(DELETE_REASONS)
            return self.refuse(400, "invalid", f"reason must be one of {choices}; not {reason!r}.")
        home = learner().home
        try:
            MemoryStore(home).delete_entry(layer, key, entry_id, reason)
        except ValueError as exc:  # a key no document has
            return self.refuse(400, "invalid", str(exc))
        except KeyError:
            return self.refuse(
                404, "unknown", f"{layer}/{key}.md has no entry {entry_id}; it may be gone already."
            )
        self.reply(dump(DocumentsReply.model_validate({"documents": memory_documents(home)})))


class PreviewHandler(TutorHandler):
    """``POST memory/<layer>/<key>/preview`` with ``{"mode": "update"}``: what would change."""

    @tornado.web.authenticated
    @authorized
    async def post(self, layer: str, key: str) -> None:
        body, ok = self.read_json("The request")
        if not ok:
            return None
        try:
            mode = PreviewRequest.model_validate(body).mode
        except ValidationError:
            return self.refuse(400, "invalid", f"mode must be one of {', '.join(MODES)}.")
        if (layer, key) == ("L3", "preferences"):
            return self.refuse(
                400, "invalid", "preferences.md holds what you asked for; edit it by hand."
            )
        home = learner().home
        store = MemoryStore(home)
        try:
            store.path(layer, key)
        except ValueError as exc:
            return self.refuse(400, "invalid", str(exc))
        try:
            model, keys = _model_for(mode)
        except LookupError as exc:
            return self.refuse(400, "no_model", str(exc))
        try:
            shown = await preview(store, model, layer=layer, key=key, mode=mode)
        except RunBusyError as exc:
            return self.refuse(409, "busy", str(exc))
        except Exception as exc:  # the model's failure, in words, never with the key
            reason = scrub_text(f"{type(exc).__name__}: {exc}", usable(keys))
            self.log.warning("deeptutor: consolidation preview failed: %s", reason)
            return self.refuse(502, "model_failed", f"The consolidation failed: {reason}")
        finally:
            if model is not None:
                await model.aclose()
        self.reply(dump(PreviewReply(preview=preview_json(_hold(home, shown), shown, store))))


class PreviewApplyHandler(TutorHandler):
    """``POST memory/previews/<id>`` writes exactly the preview; ``DELETE`` discards it."""

    @tornado.web.authenticated
    @authorized
    def post(self, preview_id: str) -> None:
        home = learner().home
        held = _held(preview_id, home)
        if held is None:
            return self.refuse(
                404,
                "unknown",
                "This preview is gone (discarded, applied or too old). Make a new one.",
            )
        try:
            applied = apply_preview(MemoryStore(home), held.preview)
        except StaleDocumentError as exc:
            return self.refuse(409, "stale", str(exc))
        except RunBusyError as exc:
            return self.refuse(409, "busy", str(exc))
        _drop(preview_id)
        reply = {"applied": len(applied.valid), "documents": memory_documents(home)}
        self.reply(dump(ApplyReply.model_validate(reply)))

    @tornado.web.authenticated
    @authorized
    def delete(self, preview_id: str) -> None:
        self.reply(dump(DiscardReply(discarded=_drop(preview_id))))


def handlers(base: str) -> list[tuple[str, type[TutorHandler]]]:
    return [
        (url_path_join(base, r"memory/previews/(pv_[0-9a-f]{16})"), PreviewApplyHandler),
        (url_path_join(base, rf"memory/{DOC}/preview"), PreviewHandler),
        (url_path_join(base, rf"memory/{DOC}/(m_[A-Za-z0-9_-]{{1,64}})"), MemoryEntryHandler),
    ]
