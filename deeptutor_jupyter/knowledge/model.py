"""The values the knowledge package hands out: chunks, hits, index reports, and its errors.

Kept free of numpy and bm25s so that importing ``deeptutor_jupyter.knowledge`` costs nothing
until a knowledge base is actually opened.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from deeptutor_jupyter.errors import DeepTutorError

__all__ = [
    "Chunk",
    "Hit",
    "IndexReport",
    "KnowledgeBaseNotFound",
    "KnowledgeIndexError",
    "validate_kb_name",
]

_KB_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class KnowledgeIndexError(DeepTutorError, RuntimeError):
    code = "knowledge_index"

    """A knowledge base cannot be used as it is; the message says what to do about it."""


class KnowledgeBaseNotFound(KnowledgeIndexError, LookupError):
    """No knowledge base of that name exists under ``$DEEPTUTOR_HOME/kb``."""


def validate_kb_name(name: str) -> str:
    """The name itself, or a ValueError: it becomes a folder name, so no path tricks."""
    if not isinstance(name, str) or not _KB_NAME.fullmatch(name):
        raise ValueError(
            f"Invalid knowledge base name {name!r}: use 1 to 64 letters, digits, '-' or '_'"
        )
    return name


@dataclass(frozen=True)
class Chunk:
    """One searchable piece of a source file, and where exactly it came from.

    ``path`` is POSIX and relative to the knowledge base's root (absolute only for a file that
    lies outside it). ``cell`` is the 0-based index in the notebook's ``cells`` list, ``page``
    is 1-based, ``line`` is the 1-based first line in a text file (None for notebooks and PDFs).
    ``cell_id`` is the nbformat >= 4.5 cell id when the notebook has one: JupyterLab opens a
    notebook at a cell from ``#cell-id=<id>``, but has no fragment for a cell *index*.
    """

    chunk_id: str
    kb: str
    path: str
    text: str
    title: str
    cell: int | None
    page: int | None
    kind: str
    line: int | None = None
    cell_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        # Spelled out: dataclasses.asdict deep-copies every field and was most of writing
        # a large index.
        return {
            "chunk_id": self.chunk_id,
            "kb": self.kb,
            "path": self.path,
            "text": self.text,
            "title": self.title,
            "cell": self.cell,
            "page": self.page,
            "kind": self.kind,
            "line": self.line,
            "cell_id": self.cell_id,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Chunk:
        return cls(**data)


@dataclass(frozen=True)
class Hit:
    """A chunk a query matched, its BM25 score, and the knowledge base's root (for links)."""

    chunk: Chunk
    score: float
    root: str = ""

    def source(self) -> dict[str, Any]:
        """What a citation needs: ``{"kb", "file", "cell", "page", "chunk_id", "score"}``."""
        c = self.chunk
        return {
            "kb": c.kb,
            "file": c.path,
            "cell": c.cell,
            "page": c.page,
            "chunk_id": c.chunk_id,
            "score": round(self.score, 4),
        }

    def link(self, server_root: Path | str | None = None) -> str:
        """A JupyterLab URL path (relative to the server's base URL) that opens the source.

        ``lab/tree/<path>`` opens the file. Fragments JupyterLab 4 understands: notebooks
        ``#cell-id=<id>`` (scrolls to and selects that cell; only when the notebook stores
        cell ids), text and Python files ``#line=<0-based line>`` (file editor), PDFs
        ``#page=N`` (read by the browser's PDF viewer). Without ``server_root`` the path is the
        chunk's path, i.e. relative to the knowledge base's root; with it, the file's absolute
        location is made relative to the Jupyter server's root directory when it lies inside.
        """
        path = self.chunk.path
        if server_root is not None and self.root:
            absolute = Path(self.root, path)
            # Outside the server root JupyterLab cannot open it anyway; keep the KB path.
            with contextlib.suppress(ValueError):
                path = absolute.relative_to(Path(server_root)).as_posix()
        url = "lab/tree/" + quote(str(PurePosixPath(path)).lstrip("/"), safe="/")
        return url + self._fragment()

    def _fragment(self) -> str:
        c = self.chunk
        if c.page is not None:
            return f"#page={c.page}"
        if c.cell_id:
            return "#cell-id=" + quote(c.cell_id, safe="")
        if c.line is not None and c.cell is None:
            return f"#line={c.line - 1}"
        return ""


@dataclass
class IndexReport:
    """What one ``add_sources`` / ``refresh`` did. Counts are files, except ``chunks``."""

    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    chunks: int = 0
    rebuilt_from_corruption: bool = False
    errors: list[str] = field(default_factory=list)
    # Set with rebuilt_from_corruption when the index was sound but in an older format.
    rebuilt_from_older_version: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.rebuilt_from_corruption)

    def summary(self) -> str:
        """One line for the magic's output."""
        parts = [
            f"{self.added} added",
            f"{self.updated} updated",
            f"{self.removed} removed",
            f"{self.unchanged} unchanged",
            _counted(self.chunks, "chunk", "chunks"),
        ]
        line = ", ".join(parts)
        if self.rebuilt_from_older_version:
            line += "; the index was in an older version's format and has been rebuilt"
        elif self.rebuilt_from_corruption:
            line += "; the index was damaged and has been rebuilt"
        if self.errors:
            line += f"; {_counted(len(self.errors), 'problem', 'problems')}"
        return line


def _counted(n: int, one: str, many: str) -> str:
    """``1 chunk``, ``2 chunks``: a count the learner reads as words."""
    return f"{n} {one if n == 1 else many}"
