"""Learner memory: L1 traces, L2 per-surface and L3 cross-surface documents with provenance.

See ``docs/memory.md``. Importing this package stays cheap (no IPython, ipywidgets or httpx):
the kernel, the server extension and the CLI all use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deeptutor_jupyter.lazy_names import lazy_names
from deeptutor_jupyter.memory.document import (
    MAX_TEXT,
    Document,
    DocumentError,
    Entry,
    Section,
    normalise,
    parse,
    render,
)
from deeptutor_jupyter.memory.store import EMPTY_MEMORY, L3_KEYS, MemoryStore, WriteResult
from deeptutor_jupyter.memory.trace import (
    SURFACES,
    TRACE_MIME,
    TraceRecord,
    new_trace_id,
    summarize_answer,
)

if TYPE_CHECKING:
    from deeptutor_jupyter.memory.notebooks import ImportResult
    from deeptutor_jupyter.memory.ops import DELETE_REASONS, AddOp, DeleteOp, EditOp, OpsPreview

# Name -> the submodule that defines it, imported when the name is first used: a turn reads
# memory and writes its trace, it edits a document rarely and imports notebooks never (issue 28).
_LAZY = {
    "ImportResult": "notebooks",
    "DELETE_REASONS": "ops",
    "AddOp": "ops",
    "DeleteOp": "ops",
    "EditOp": "ops",
    "OpsPreview": "ops",
}

__all__ = [
    "DELETE_REASONS",
    "EMPTY_MEMORY",
    "L3_KEYS",
    "MAX_TEXT",
    "SURFACES",
    "TRACE_MIME",
    "AddOp",
    "DeleteOp",
    "Document",
    "DocumentError",
    "EditOp",
    "Entry",
    "ImportResult",
    "MemoryStore",
    "OpsPreview",
    "Section",
    "TraceRecord",
    "WriteResult",
    "new_trace_id",
    "normalise",
    "parse",
    "render",
    "summarize_answer",
]


__getattr__ = lazy_names(__name__, _LAZY)
