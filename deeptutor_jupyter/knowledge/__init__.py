"""Knowledge bases: ingest course material, index it with BM25, search it with citations.

Importing this package is cheap: bm25s, numpy and pypdf are imported only when a knowledge
base is indexed or searched, and the index and ingest modules of this package only when one
of their names is first used (a kernel's first turn without a knowledge base needs none of
them: issue 28). ``SearchKnowledgeTool`` lives in ``deeptutor_jupyter.knowledge.tools`` (it
brings in pydantic and the tool base).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deeptutor_jupyter.knowledge.listing import list_kbs
from deeptutor_jupyter.knowledge.mount import CONDITIONAL_MOUNTS, MountContext, mounted_tools

# Imported here, not on first use: the submodule of the same name, once imported, would be
# what ``from deeptutor_jupyter.knowledge import tokenize`` gives.
from deeptutor_jupyter.knowledge.tokenize import tokenize
from deeptutor_jupyter.lazy_names import lazy_names

if TYPE_CHECKING:
    from deeptutor_jupyter.knowledge.base import KnowledgeBase, Progress, remove_kb
    from deeptutor_jupyter.knowledge.ingest import SUPPORTED_SUFFIXES, IngestError, ingest_file
    from deeptutor_jupyter.knowledge.model import (
        Chunk,
        Hit,
        IndexReport,
        KnowledgeBaseNotFound,
        KnowledgeIndexError,
        validate_kb_name,
    )

# Name -> the submodule that defines it, imported when the name is first used.
_LAZY = {
    "KnowledgeBase": "base",
    "Progress": "base",
    "remove_kb": "base",
    "SUPPORTED_SUFFIXES": "ingest",
    "IngestError": "ingest",
    "ingest_file": "ingest",
    "Chunk": "model",
    "Hit": "model",
    "IndexReport": "model",
    "KnowledgeBaseNotFound": "model",
    "KnowledgeIndexError": "model",
    "validate_kb_name": "model",
}

__all__ = [
    "CONDITIONAL_MOUNTS",
    "SUPPORTED_SUFFIXES",
    "Chunk",
    "Hit",
    "IndexReport",
    "IngestError",
    "KnowledgeBase",
    "KnowledgeBaseNotFound",
    "KnowledgeIndexError",
    "MountContext",
    "Progress",
    "ingest_file",
    "list_kbs",
    "mounted_tools",
    "remove_kb",
    "tokenize",
    "validate_kb_name",
]


__getattr__ = lazy_names(__name__, _LAZY)
