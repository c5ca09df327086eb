"""The manifest's table of indexed files, kept by column.

One row per file, in the files' order: its path relative to the root, the stamp it had when
read (``size``, ``mtime_ns``), its SHA-256, its chunks' first index row and count, and their
byte range in the chunk store with its checksum (``offset``, ``length``, ``digest``).

By column, because a refresh touches every file's stamp and little else: at 50,000 files a
list of 50,000 small objects costs more to parse, to keep (each one is tracked by the garbage
collector) and to free than the stat calls of the refresh, while a column of numbers parses at
C speed and holds no object the collector looks at.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from deeptutor_jupyter.errors import DeepTutorError

__all__ = ["COLUMNS", "FileTable", "TableError"]

COLUMNS = ("path", "size", "mtime_ns", "sha256", "chunks", "row", "offset", "length", "digest")
ENTRY = COLUMNS[1:]  # a row without its path


class TableError(DeepTutorError, ValueError):
    """The table in a manifest is not one this version wrote."""

    code = "file_table"


class FileTable:
    """Columns of equal length; ``where(path)`` finds a row."""

    __slots__ = (*COLUMNS, "_where")

    def __init__(self, columns: dict[str, list[Any]] | None = None) -> None:
        for name in COLUMNS:
            setattr(self, name, columns[name] if columns is not None else [])
        self._where: dict[str, int] | None = None

    path: list[str]
    size: list[int]
    mtime_ns: list[int]
    sha256: list[str]
    chunks: list[int]
    row: list[int]
    offset: list[int]
    length: list[int]
    digest: list[str]

    @classmethod
    def from_json(cls, data: Any) -> FileTable:
        """The table of a parsed manifest; TableError when it has another shape.

        Only the shape is checked here (C-speed checks of whole columns); values that are not
        numbers where numbers belong fail when the row lookup turns them into arrays.
        """
        if not isinstance(data, dict) or set(data) != set(COLUMNS):
            raise TableError("the file table has unknown columns")
        if not all(isinstance(data[name], list) for name in COLUMNS):
            raise TableError("a column of the file table is not a list")
        if len({len(data[name]) for name in COLUMNS}) != 1:
            raise TableError("the file table's columns differ in length")
        try:
            "".join(data["path"])  # at C speed: TypeError on the first path that is not text
        except TypeError as exc:
            raise TableError("a path in the file table is not text") from exc
        return cls(data)

    def to_json(self) -> dict[str, list[Any]]:
        return {name: getattr(self, name) for name in COLUMNS}

    def __len__(self) -> int:
        return len(self.path)

    def where(self, path: str) -> int | None:
        """The row of ``path``, or None."""
        return self.rows_by_path().get(path)

    def rows_by_path(self) -> dict[str, int]:
        """Path -> row (a dict built once, on the first call)."""
        if self._where is None:
            self._where = dict(zip(self.path, range(len(self.path)), strict=True))
        return self._where

    def entry(self, i: int) -> dict[str, Any]:
        """Row ``i`` as a dict (for the few rows a search or a change reads)."""
        return {name: getattr(self, name)[i] for name in ENTRY}

    def append(self, path: str, entry: dict[str, Any]) -> None:
        self.path.append(path)
        for name in ENTRY:
            getattr(self, name).append(entry[name])
        self._where = None

    def set(self, i: int, entry: dict[str, Any]) -> None:
        for name in ENTRY:
            getattr(self, name)[i] = entry[name]

    def take(self, rows: list[int]) -> FileTable:
        """A new table of the rows at ``rows``, in that order."""
        if not rows:
            return FileTable()
        if len(rows) == 1:
            return FileTable({n: [getattr(self, n)[rows[0]]] for n in COLUMNS})
        pick = itemgetter(*rows)  # one C call per column
        return FileTable({n: list(pick(getattr(self, n))) for n in COLUMNS})

    def copy(self) -> FileTable:
        return FileTable({n: list(getattr(self, n)) for n in COLUMNS})
