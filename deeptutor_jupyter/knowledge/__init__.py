"""Knowledge bases: ingest course material, index it with BM25, search it with citations.

Importing this package is cheap: bm25s, numpy and pypdf are imported only when a knowledge
base is indexed or searched. ``SearchKnowledgeTool`` lives in
``deeptutor_jupyter.knowledge.tools`` (it brings in pydantic and the tool base).
"""

from deeptutor_jupyter.knowledge.base import KnowledgeBase, Progress, list_kbs, remove_kb
from deeptutor_jupyter.knowledge.ingest import SUPPORTED_SUFFIXES, IngestError, ingest_file
from deeptutor_jupyter.knowledge.model import (
    Chunk,
    Hit,
    IndexReport,
    KnowledgeBaseNotFound,
    KnowledgeIndexError,
    validate_kb_name,
)
from deeptutor_jupyter.knowledge.mount import CONDITIONAL_MOUNTS, MountContext, mounted_tools
from deeptutor_jupyter.knowledge.tokenize import tokenize

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
