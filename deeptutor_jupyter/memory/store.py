"""``MemoryStore``: the one facade over L1 traces and the L2/L3 documents of one learner.

The store holds no document state it trusts between calls: every read checks the file on disk,
so any number of stores in any number of kernels can share one ``$DEEPTUTOR_HOME``:
read-modify-write sequences hold a per-document ``flock`` and files are replaced atomically.
Parsed documents are kept by file stamp (``mtime_ns``, size, inode): a replaced file has a new
inode, so an unchanged stamp means unchanged text, and the system prompt of every turn does not
re-parse a 10,000-entry profile.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from deeptutor_jupyter._files import private_file
from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.memory._files import append_line, atomic_write_text, locked, read_text
from deeptutor_jupyter.memory.document import (
    Document,
    DocumentError,
    Entry,
    Section,
    new_entry_id,
    normalise,
    parse,
    ref_problem,
    render,
    section_problem,
    text_problem,
)
from deeptutor_jupyter.memory.trace import SURFACE_RE, TraceLog, TraceRecord

if TYPE_CHECKING:
    from deeptutor_jupyter.memory.notebooks import ImportResult
    from deeptutor_jupyter.memory.ops import DeleteReason, OpsPreview

L3_KEYS = ("recent", "profile", "scope", "preferences")
EMPTY_MEMORY = "Nothing is remembered about this learner yet."


class StaleDocumentError(DeepTutorError, ValueError):
    """The document is not the text a change was prepared against (edited meanwhile)."""

    code = "stale"


@dataclass(frozen=True)
class WriteResult:
    status: Literal["added", "edited", "duplicate"]
    entry_id: str


class MemoryStore:
    """Memory under ``home / "memory"``. ``fsync_traces`` trades L1 throughput for durability
    against power loss (a killed process loses nothing either way: appends are single writes)."""

    def __init__(self, home: Path, *, fsync_traces: bool = False) -> None:
        self.home = Path(home)
        self.root = self.home / "memory"
        self._traces = TraceLog(
            self.root / "trace", self.root / "locks" / "trace.lock", fsync=fsync_traces
        )
        self._parsed: dict[Path, tuple[tuple[int, int, int], Document]] = {}
        self._prompt: tuple[tuple[Any, ...], str] | None = None
        self._concat: tuple[tuple[Any, ...], str] | None = None

    # ---- L1 -----------------------------------------------------------------------------

    def emit(self, record: TraceRecord) -> bool:
        """Append one turn's trace; False if its trace id is already in L1."""
        return self._traces.append([record])[0]

    def emit_many(self, records: Iterable[TraceRecord]) -> list[bool]:
        """``emit`` for a batch under one lock (imports)."""
        return self._traces.append(records)

    def traces(self, surface: str | None = None, since: float | None = None) -> list[TraceRecord]:
        if surface is not None:
            _check_surface(surface)
        return self._traces.read(surface, since)

    def known_trace_ids(self) -> set[str]:
        return self._traces.known_ids()

    def import_notebooks(self, path: Path) -> ImportResult:
        """Rebuild L1 from the trace bundles of saved notebooks; trace ids make it idempotent."""
        from deeptutor_jupyter.memory.notebooks import ImportResult, find_notebooks, trace_bundles

        result = ImportResult()
        for notebook in find_notebooks(Path(path)):
            result.notebooks += 1
            added = self.emit_many(trace_bundles(notebook, result.errors))
            result.added += sum(added)
            result.skipped_duplicates += len(added) - sum(added)
        return result

    # ---- documents ----------------------------------------------------------------------

    def path(self, layer: str, key: str) -> Path:
        return self.root / _doc_name(layer, key)

    def read(self, layer: str, key: str) -> Document:
        """The parsed document; a fresh copy the caller may change."""
        return _copy(self._read_shared(layer, key))

    def _read_shared(self, layer: str, key: str) -> Document:
        # The cached parse itself: callers must not change it.
        path = self.path(layer, key)
        stamp = _stamp(path)
        cached = self._parsed.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        doc = parse(read_text(path))
        if stamp == _stamp(path):  # not replaced while it was read
            self._parsed[path] = (stamp, doc)
        return doc

    def read_text(self, layer: str, key: str) -> str:
        return read_text(self.path(layer, key))

    def read_l3_concat(self) -> str:
        """Every non-empty L3 document, rendered; kept until one of their stamps moves."""
        stamps = tuple(_stamp(self.path("L3", key)) for key in L3_KEYS)
        if self._concat is not None and self._concat[0] == stamps:
            return self._concat[1]
        text = self._l3_concat()
        self._concat = (stamps, text)
        return text

    def _l3_concat(self) -> str:
        parts = []
        for key in L3_KEYS:
            doc = self._read_shared("L3", key)
            if not doc.is_empty():
                parts.append(f"# L3/{key}.md\n\n{render(doc).strip()}")
        return "\n\n".join(parts) if parts else EMPTY_MEMORY

    def system_prompt_block(self, limit_chars: int = 4000) -> str:
        """Preferences then profile as plain bullets, cut at whole entries to ``limit_chars``.

        Preferences go first: they are what the learner asked for explicitly, so when the cap
        bites it is inferred profile lines that give way. Paid at every turn start, so the
        result is kept until either file's stamp moves.
        """
        stamps = (
            limit_chars,
            _stamp(self.path("L3", "preferences")),
            _stamp(self.path("L3", "profile")),
        )
        if self._prompt is not None and self._prompt[0] == stamps:
            return self._prompt[1]
        block = self._prompt_block(limit_chars)
        self._prompt = (stamps, block)
        return block

    def _prompt_block(self, limit_chars: int) -> str:
        blocks = [
            ("Preferences", self._read_shared("L3", "preferences")),
            ("Profile", self._read_shared("L3", "profile")),
        ]
        lines = ["## What you remember about this learner"]
        size, omitted = len(lines[0]), 0
        for title, doc in blocks:
            if doc.is_empty():
                continue
            header = f"### {title}"
            for index, (_, entry) in enumerate(doc.entries()):
                line = f"- {entry.text}"
                extra = len(line) + 1 + (len(header) + 1 if index == 0 else 0)
                if size + extra > limit_chars - 60:  # room for the omission note
                    omitted += 1
                    continue
                if index == 0:
                    lines.append(header)
                lines.append(line)
                size += extra
        if len(lines) == 1:
            return ""
        if omitted:
            lines.append(f"({omitted} more remembered items not shown; use read_memory.)")
        return "\n".join(lines)

    def overwrite(self, layer: str, key: str, text: str) -> None:
        """Replace a document with a human's edit; ``DocumentError`` if it does not parse."""
        doc = parse(text, strict=True)
        with self._doc_lock(layer, key):
            atomic_write_text(self.path(layer, key), render(doc))

    def delete_document(self, layer: str, key: str) -> int:
        """Remove a whole document (a learner's choice); its entries go to the deletion log.

        The number of entries removed. Traces stay, and so does what consolidation has seen,
        so the next run does not write the same lines back from old traces.
        """
        with self._doc_lock(layer, key):
            doc = self.read(layer, key)
            path = self.path(layer, key)
            path.unlink(missing_ok=True)
            entries = [entry for _, entry in doc.entries()]
            self._log_deletions(
                layer, key, [(entry, "removed by the learner") for entry in entries]
            )
        return len(entries)

    def delete_entry(self, layer: str, key: str, entry_id: str, reason: DeleteReason) -> None:
        preview = self.apply_ops(layer, key, [{"op": "delete", "id": entry_id, "reason": reason}])
        if preview.rejected:
            raise KeyError(preview.rejected[0][1])

    def preview_ops(self, layer: str, key: str, ops: list[dict[str, Any]]) -> OpsPreview:
        text = self.read_text(layer, key)
        return self._plan(layer, key, text, ops)[1]

    def apply_ops(
        self,
        layer: str,
        key: str,
        ops: list[dict[str, Any]],
        *,
        base: str | None = None,
        expect: str | None = None,
    ) -> OpsPreview:
        """Apply the valid ops in one atomic write; the rejected ones come back with reasons.

        With ``base``, ``StaleDocumentError`` when the document is no longer that text; with
        ``expect``, also when the result would not be exactly that text (a preview's). Both
        are checked under the document's lock, so nothing is written on a refusal.
        """
        with self._doc_lock(layer, key):
            text = self.read_text(layer, key)
            if base is not None and text != base:
                raise StaleDocumentError(
                    f"{_doc_name(layer, key)} changed since the preview was made; nothing was "
                    "written. Make a new preview."
                )
            preview = self._plan(layer, key, text, ops)[1]
            if expect is not None and preview.after != expect:
                raise StaleDocumentError(
                    f"Applying the preview to {_doc_name(layer, key)} would not give the "
                    "previewed text; nothing was written. Make a new preview."
                )
            if preview.valid or preview.changed:
                atomic_write_text(self.path(layer, key), preview.after)
            self._log_deletions(layer, key, preview.deleted)
        return preview

    def write_preference(
        self,
        op: Literal["add", "edit"],
        text: str,
        *,
        trace_id: str,
        entry_id: str | None = None,
        section: str = "Preferences",
    ) -> WriteResult:
        """The narrow door by which the model writes ``preferences.md`` (``write_memory``).

        ``add`` is idempotent: a long tool-driven turn tends to resend the same write, and
        preferences are never consolidated, so a normalised duplicate is reported, not appended.
        """
        text = text.strip()
        if problem := text_problem(text) or section_problem(section) or ref_problem(trace_id):
            raise ValueError(problem)
        with self._doc_lock("L3", "preferences"):
            doc = self.read("L3", "preferences")
            if op == "edit":
                found = doc.find(entry_id or "")
                if found is None:
                    raise KeyError(f"No preference with id {entry_id!r}")
                entry = found[1]
                entry.text = text
                entry.refs = list(dict.fromkeys([*entry.refs, trace_id]))
                status: Literal["added", "edited", "duplicate"] = "edited"
            else:
                wanted = normalise(text)
                for _, existing in doc.entries():
                    if normalise(existing.text) == wanted:
                        return WriteResult("duplicate", existing.id)
                entry = Entry(new_entry_id(), text, [trace_id])
                target = doc.ensure_section(section)
                target.entries.append(entry)
                status = "added"
            atomic_write_text(self.path("L3", "preferences"), render(doc))
        return WriteResult(status, entry.id)

    # ---- consolidation bookkeeping ------------------------------------------------------

    def seen_traces(self, layer: str, key: str) -> set[str]:
        state = _load_json(self.root / "state.json")
        return set(state.get("seen", {}).get(_doc_name(layer, key), []))

    def mark_seen(self, layer: str, key: str, trace_ids: Iterable[str]) -> None:
        with locked(self.root / "locks" / "state.lock"):
            state = _load_json(self.root / "state.json")
            seen = state.setdefault("seen", {})
            name = _doc_name(layer, key)
            seen[name] = sorted(set(seen.get(name, [])) | set(trace_ids))
            atomic_write_text(self.root / "state.json", json.dumps(state, indent=1) + "\n")

    def run_lock(self, layer: str, key: str) -> contextlib.AbstractContextManager[None]:
        """Non-blocking: ``BlockingIOError`` while another run holds this document."""
        name = _doc_name(layer, key).replace("/", "-").removesuffix(".md")
        return locked(self.root / "runs" / f"{name}.lock", blocking=False)

    # ---- whole store --------------------------------------------------------------------

    def forget_all(self) -> None:
        """Delete every trace and document. Lock files stay: others may hold them right now."""
        with locked(self.root / "locks" / "trace.lock"):
            for name in ("trace", "L2", "L3"):
                shutil.rmtree(self.root / name, ignore_errors=True)
            for name in ("state.json", "deletions.jsonl"):
                (self.root / name).unlink(missing_ok=True)
            self._traces.forget()

    def export_zip(self, dest: Path) -> Path:
        """Zip traces, documents, state and the deletion log; ``dest`` may be a folder."""
        dest = Path(dest)
        if dest.is_dir():
            dest = dest / f"deeptutor-memory-{time.strftime('%Y%m%d-%H%M%S')}.zip"
        dest.parent.mkdir(parents=True, exist_ok=True)
        private_file(dest)  # the export holds every memory: 0600 like the files it copies
        with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(self._exportable()):
                archive.write(path, Path("memory") / path.relative_to(self.root))
        return dest

    # ---- internals ----------------------------------------------------------------------

    def _exportable(self) -> Iterator[Path]:
        for path in self.root.rglob("*"):
            relative = path.relative_to(self.root)
            skipped = relative.parts[0] in ("locks", "runs") or path.name.endswith(".tmp")
            if path.is_file() and not skipped:
                yield path

    def _doc_lock(self, layer: str, key: str) -> contextlib.AbstractContextManager[None]:
        name = _doc_name(layer, key).replace("/", "-").removesuffix(".md")
        return locked(self.root / "locks" / f"{name}.lock")

    def _plan(
        self, layer: str, key: str, text: str, ops: list[dict[str, Any]]
    ) -> tuple[Document, OpsPreview]:
        # Here, not at import: a turn reads memory, an edit is rare (issue 28).
        from deeptutor_jupyter.memory.ops import plan

        doc = parse(text)
        return plan(doc, ops, self.known_trace_ids(), before=text, name=_doc_name(layer, key))

    def _log_deletions(self, layer: str, key: str, deleted: list[tuple[Entry, str]]) -> None:
        for entry, reason in deleted:
            line = {
                "at": time.time(),
                "document": _doc_name(layer, key),
                "entry_id": f"m_{entry.id}",
                "text": entry.text,
                "refs": entry.refs,
                "reason": reason,
            }
            append_line(self.root / "deletions.jsonl", json.dumps(line, ensure_ascii=False))


def _doc_name(layer: str, key: str) -> str:
    if layer == "L3":
        if key not in L3_KEYS:
            raise ValueError(f"L3 has {', '.join(L3_KEYS)}; not {key!r}")
    elif layer == "L2":
        _check_surface(key)
    else:
        raise ValueError(f"layer must be 'L2' or 'L3', not {layer!r}")
    return f"{layer}/{key}.md"


def _stamp(path: Path) -> tuple[int, int, int]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return (0, 0, 0)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _copy(doc: Document) -> Document:
    # Much cheaper than copy.deepcopy: only lists of entries and refs are mutable.
    sections = [
        Section(s.name, [Entry(e.id, e.text, list(e.refs)) for e in s.entries])
        for s in doc.sections
    ]
    return Document(sections, doc.title)


def _check_surface(surface: str) -> None:
    if not SURFACE_RE.match(surface):
        raise ValueError(f"{surface!r} is not a surface name (chat, notebook, quiz, kb, ...)")


def _load_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(read_text(path) or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


__all__ = [
    "EMPTY_MEMORY",
    "L3_KEYS",
    "DocumentError",
    "MemoryStore",
    "StaleDocumentError",
    "WriteResult",
]
