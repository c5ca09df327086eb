"""Edits to a document as validated operations: the only way a model changes memory.

A model (or the workbench) proposes ``{"ops": [...]}``; each op is checked on its own against the
document as the ops before it left it. A valid op is applied, an invalid one is returned with the
reason and changes nothing, so one bad line never blocks the good ones.

Schema (``AddOp | EditOp | DeleteOp``, discriminated by ``op``)::

    {"op": "add",    "section": str, "text": str <= 240, "refs": [trace id, ...] (>= 1)}
    {"op": "edit",   "id": "m_<id>", "text": str <= 240, "refs": [trace id, ...] (>= 1)}
    {"op": "delete", "id": "m_<id>", "reason": "contradicted"|"superseded"|"stale"|"low-signal"}

References must be trace ids L1 knows or references the document already cites.
"""

from __future__ import annotations

import difflib
import functools
import typing
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.memory.document import (
    _ID_RE,
    MAX_TEXT,
    Document,
    Entry,
    Section,
    bare_id,
    new_entry_id,
    normalise,
    ref_problem,
    render,
    section_problem,
    text_problem,
)

# In the order the forms offer them; "stale" is the one a bare delete takes.
DeleteReason = Literal["stale", "contradicted", "superseded", "low-signal"]
DELETE_REASONS: tuple[DeleteReason, ...] = typing.get_args(DeleteReason)


class _Op(LazyModel):
    # Models add chatter fields ("why", "confidence"); ignoring them is kinder than rejecting.
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class AddOp(_Op):
    op: Literal["add"]
    section: str = Field(min_length=1)
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    refs: list[str] = Field(min_length=1)
    # Set by ``plan`` to the id it gave the new entry, so applying a previewed batch writes the
    # entry under the id the preview showed; a free id is kept, a taken one replaced.
    id: str = ""


class EditOp(_Op):
    op: Literal["edit"]
    id: str = Field(min_length=1)
    section: str = ""  # accepted for symmetry; an edit never moves an entry
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    refs: list[str] = Field(min_length=1)


class DeleteOp(_Op):
    op: Literal["delete"]
    id: str = Field(min_length=1)
    section: str = ""
    reason: DeleteReason


Op = Annotated[AddOp | EditOp | DeleteOp, Field(discriminator="op")]


@functools.cache
def _op_adapter() -> TypeAdapter[AddOp | EditOp | DeleteOp]:
    # Built at the first edit, not at import: a turn imports this module long before (and
    # usually without) editing memory, and building it cost ~8 ms of its first request.
    return TypeAdapter(Op)


@dataclass
class OpsPreview:
    """What a batch would do (``preview_ops``) or did (``apply_ops``)."""

    valid: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    before: str = ""
    after: str = ""
    diff: str = ""
    # Entries removed by the valid deletes, for the deletion log.
    deleted: list[tuple[Entry, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.before != self.after


def unified_diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{name}",
        tofile=f"b/{name}",
    )
    return "".join(lines)


def plan(
    doc: Document,
    ops: Iterable[Any],
    known_refs: set[str],
    *,
    before: str,
    name: str,
) -> tuple[Document, OpsPreview]:
    """Validate and apply ``ops`` to a copy of ``doc``; the original is never touched.

    Each op costs about the same whatever the document's size: entries are found through one
    index by id, duplicates through a count of normalised texts, and deleted entries leave
    their sections once, at the end (a 10,000-entry ``merge`` used to take half a minute).
    """
    work = _Work(doc)
    known = known_refs | doc.refs()
    preview = OpsPreview(before=before)
    for raw in ops:
        shown = raw if isinstance(raw, dict) else {"op": raw}
        try:
            op = _op_adapter().validate_python(raw)
        except ValidationError as exc:
            preview.rejected.append((shown, _describe(exc)))
            continue
        problem = work.apply(op, known, preview)
        if problem:
            preview.rejected.append((shown, problem))
        else:
            preview.valid.append(op.model_dump(exclude_defaults=True) | {"op": op.op})
    result = work.finish()
    preview.after = render(result)
    preview.diff = unified_diff(before, preview.after, name)
    return result, preview


class _Work:
    """A copy of a document being edited, with the lookups the ops need."""

    def __init__(self, doc: Document) -> None:
        self.doc = Document(
            [
                Section(s.name, [Entry(e.id, e.text, list(e.refs)) for e in s.entries])
                for s in doc.sections
            ],
            doc.title,
        )
        self.by_id: dict[str, tuple[Section, Entry]] = {}
        self.norms: Counter[str] = Counter()
        for section, entry in self.doc.entries():
            self.by_id.setdefault(entry.id, (section, entry))
            self.norms[normalise(entry.text)] += 1
        self.deleted: set[int] = set()

    def find(self, entry_id: str) -> tuple[Section, Entry] | None:
        return self.by_id.get(bare_id(entry_id))

    def apply(self, op: AddOp | EditOp | DeleteOp, known: set[str], out: OpsPreview) -> str:
        if isinstance(op, DeleteOp):
            found = self.find(op.id)
            if found is None:
                return f"no entry with id {op.id!r}"
            entry = found[1]
            del self.by_id[entry.id]
            self.norms[normalise(entry.text)] -= 1
            self.deleted.add(id(entry))
            out.deleted.append((entry, op.reason))
            return ""
        problem = text_problem(op.text) or _refs_problem(op.refs, known)
        if problem:
            return problem
        if isinstance(op, EditOp):
            found = self.find(op.id)
            if found is None:
                return f"no entry with id {op.id!r}"
            entry = found[1]
            self.norms[normalise(entry.text)] -= 1
            self.norms[normalise(op.text)] += 1
            entry.text, entry.refs = op.text, list(dict.fromkeys(op.refs))
            return ""
        if problem := section_problem(op.section):
            return problem
        norm = normalise(op.text)
        if self.norms[norm] > 0:
            twin = next(
                e for _, e in self.by_id.values() if normalise(e.text) == norm
            )  # only on a rejected duplicate, to name it
            return f"duplicate of entry m_{twin.id}"
        target = self.doc.ensure_section(op.section)
        # Applying a previewed batch writes the entry under the id the preview showed: a free
        # id is kept, a taken one replaced.
        wanted = op.id.removeprefix("m_")
        free = _ID_RE.match(wanted) and wanted not in self.by_id
        entry = Entry(wanted if free else new_entry_id(), op.text, list(dict.fromkeys(op.refs)))
        target.entries.append(entry)
        self.by_id[entry.id] = (target, entry)
        self.norms[norm] += 1
        op.id = f"m_{entry.id}"
        return ""

    def finish(self) -> Document:
        if self.deleted:
            for section in self.doc.sections:
                section.entries = [e for e in section.entries if id(e) not in self.deleted]
        return self.doc


def _refs_problem(refs: list[str], known: set[str]) -> str | None:
    for ref in refs:
        if problem := ref_problem(ref):
            return problem
        if ref not in known:
            return f"unknown reference {ref!r}: cite trace ids from the evidence"
    return None


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "op"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)
