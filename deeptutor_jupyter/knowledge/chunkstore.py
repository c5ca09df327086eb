"""Appending chunk lines to a knowledge base's chunk store (layout in ``storage.py``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from deeptutor_jupyter._files import private_file
from deeptutor_jupyter.knowledge import storage
from deeptutor_jupyter.knowledge.filetable import FileTable

__all__ = ["StoreWriter"]


class StoreWriter:
    """Appends chunk lines to the chunk store: the current one, or a new generation when there
    is none to trust or when less than half of it would still be live."""

    def __init__(self, folder: Path, manifest: dict[str, Any] | None) -> None:
        self.folder = folder
        self.old_name: str | None = manifest.get("store") if manifest else None
        self.name = self.old_name or storage.new_store_name()
        self.size = 0
        self.appended = 0  # bytes appended by this writer
        self._fh: Any = None
        # [start, end, checksum] of each batch of appends: a refresh checks the store with a
        # few hashes instead of one per file.
        self.blocks: list[list[Any]] = list(manifest.get("blocks") or []) if manifest else []
        self._block: tuple[int, Any] | None = None
        self._range: tuple[int, Any] | None = None  # the file being appended: start, digest
        if self.old_name:
            try:
                self.size = (folder / self.old_name).stat().st_size
            except OSError:
                self.old_name, self.name = None, storage.new_store_name()

    def _open(self) -> Any:
        if self._fh is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            storage.remove_leftovers(self.folder)
            private_file(self.folder / self.name)  # the learner's course text: 0600, like all
            self._fh = (self.folder / self.name).open("ab")
            self.size = self._fh.seek(0, os.SEEK_END)
            self._block = (self.size, storage.new_checksum())
        return self._fh

    def begin(self) -> None:
        """Start one file's range: its lines follow in ``write`` calls, ``end`` closes it."""
        self._open()
        self._range = (self.size, storage.new_checksum())

    def write(self, data: bytes) -> None:
        """Append a part of the current range. A big file's lines come a MiB at a time, each
        written and hashed while it is in cache (not joined into one 19 MB write)."""
        assert self._block is not None and self._range is not None
        self._fh.write(data)
        self.size += len(data)
        self.appended += len(data)
        self._block[1].update(data)
        self._range[1].update(data)

    def end(self) -> dict[str, Any]:
        """The range written since ``begin``: its offset, length and checksum."""
        assert self._range is not None
        (offset, digest), self._range = self._range, None
        return {"offset": offset, "length": self.size - offset, "digest": digest.hexdigest()}

    def finish(self) -> str:
        """Flush; the store's name.

        The appended chunks are not fsynced, like the index files: the store is derived from
        the sources, and a crash that loses them leaves ranges that fail their checksums, so
        the index is rebuilt from the sources and says so. Only the manifest, which also holds
        the learner's list of sources, is made durable.
        """
        fh = self._open()
        fh.flush()
        if self._block is not None and self.size > self._block[0]:
            self.blocks.append([self._block[0], self.size, self._block[1].hexdigest()])
            self._block = None
        return self.name

    def mostly_dead(self, live: int) -> bool:
        """Less than half of the store is named by a file (``live`` bytes): compact it."""
        return self.size > 2 * live + (1 << 16)

    def compact(self, tables: list[FileTable]) -> None:
        """Copy the ranges of every file (``tables``) into a new generation of the store."""
        fresh = storage.new_store_name()
        offset = 0
        digest = storage.new_checksum()
        private_file(self.folder / fresh)
        with (self.folder / self.name).open("rb") as src, (self.folder / fresh).open("wb") as dst:
            for table in tables:
                for i, (start, length) in enumerate(zip(table.offset, table.length, strict=True)):
                    src.seek(start)
                    data = src.read(length)
                    dst.write(data)
                    digest.update(data)
                    table.offset[i] = offset
                    offset += length
            dst.flush()
        self.close()
        self.name, self.size = fresh, offset
        self.blocks = [[0, offset, digest.hexdigest()]]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
