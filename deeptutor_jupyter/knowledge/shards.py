"""The file table in pieces: one small file per folder (or per bucket of a big folder).

A refresh that knows which files changed reads and rewrites only the pieces holding them, and
the manifest names each piece with its checksum and file count; so one changed file costs the
same whether the knowledge base has 1,000 files or 50,000.

A piece's key is the folder of its files' paths (``""`` for the root). A folder with more than
``TARGET`` files is split into ``2**k`` buckets by a CRC-32 of the file name (key
``folder//n``: no path holds ``//``); ``buckets`` in the manifest says how many each big
folder has. A bucket that grows past twice ``TARGET`` has its folder split again when it is
written, so no piece grows with the corpus.

Pieces are written under new names (``tables/<hash of key>.<gen>.json``, never replaced in
place), like the index files, and those named by the previous manifest are kept until the next
write, so a reader holding it still finds them.
"""

from __future__ import annotations

import hashlib
import os
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from deeptutor_jupyter._files import DIR_MODE, write_new
from deeptutor_jupyter.knowledge.filetable import COLUMNS, FileTable, TableError

__all__ = ["TABLES_DIR", "TARGET", "read_pieces", "regroup", "shard_key", "write_pieces"]

TABLES_DIR = "tables"
TARGET = 256  # files a piece aims at: a few kB to parse and write


def shard_key(rel: str, buckets: dict[str, int]) -> str:
    """The key of the piece that holds ``rel``."""
    folder, _, name = rel.rpartition("/")
    count = buckets.get(folder, 1)
    if count <= 1:
        return folder
    return f"{folder}//{zlib.crc32(name.encode('utf-8', 'surrogatepass')) % count}"


def key_folder(key: str) -> str:
    return key.partition("//")[0]


def keys_under(keys: Any, folder: str) -> list[str]:
    """Keys of the pieces of ``folder`` and of every folder below it ("" is the root)."""
    if not folder:
        return list(keys)
    return [k for k in keys if (f := key_folder(k)) == folder or f.startswith(folder + "/")]


def regroup(
    tables: list[FileTable], buckets: dict[str, int], whole: set[str] | None = None
) -> dict[str, FileTable]:
    """The rows of ``tables`` grouped into pieces by key, each in path order.

    ``buckets`` is updated in place: a folder whose biggest piece would pass twice ``TARGET``
    files gets enough buckets for ``TARGET`` each, when every piece of it is among ``tables``
    (its folder is in ``whole``; None: every folder is whole). Otherwise it waits for a full
    refresh.
    """
    rows: dict[str, list[tuple[FileTable, int]]] = {}
    for table in tables:
        for i, rel in enumerate(table.path):
            rows.setdefault(shard_key(rel, buckets), []).append((table, i))
    folders: dict[str, int] = {}
    for key, members in rows.items():
        folder = key_folder(key)
        folders[folder] = max(folders.get(folder, 0), len(members))
    split = {
        f
        for f, biggest in folders.items()
        if biggest > 2 * TARGET and (whole is None or f in whole)
    }
    if split:
        for folder in split:
            total = sum(len(m) for k, m in rows.items() if key_folder(k) == folder)
            buckets[folder] = 1 << max(0, (total // TARGET) - 1).bit_length()
        moved = [m for k in list(rows) if key_folder(k) in split for m in rows.pop(k)]
        for table, i in moved:
            rows.setdefault(shard_key(table.path[i], buckets), []).append((table, i))
    out: dict[str, FileTable] = {}
    for key, members in rows.items():
        members.sort(key=lambda m: m[0].path[m[1]])
        out[key] = FileTable({name: [getattr(t, name)[i] for t, i in members] for name in COLUMNS})
    return out


def read_pieces(
    folder: Path, manifest: dict[str, Any], keys: Any, checksum: Callable[[bytes], str]
) -> dict[str, FileTable]:
    """The pieces ``keys`` of the manifest, each checked against its ``checksum``.

    ValueError (with a reason) when one is missing, damaged or of another shape.
    """
    pieces = manifest["shards"]
    out: dict[str, FileTable] = {}
    for key in keys:
        name, digest, _count = pieces[key]
        try:
            data = (folder / TABLES_DIR / name).read_bytes()
        except OSError as exc:
            raise ValueError(f"{TABLES_DIR}/{name} cannot be read ({exc})") from exc
        if checksum(data) != digest:
            raise ValueError(f"{TABLES_DIR}/{name} does not match its checksum")
        try:
            out[key] = FileTable.from_json(orjson.loads(data))
        except (TableError, ValueError) as exc:
            raise ValueError(f"{TABLES_DIR}/{name}: {exc}") from exc
    return out


def write_pieces(
    folder: Path, pieces: dict[str, FileTable], checksum: Callable[[bytes], str]
) -> dict[str, list[Any]]:
    """Write each piece under a new name; key -> [file, checksum, files] for the manifest.

    Not fsynced, like the index files: a piece lost to a crash fails its checksum, and the
    knowledge base is rebuilt from its sources and says so.
    """
    tables = folder / TABLES_DIR
    if not tables.is_dir():
        tables.mkdir()
        os.chmod(tables, DIR_MODE)  # mkdir's mode is filtered by the umask
    generation = uuid.uuid4().hex[:12]
    out: dict[str, list[Any]] = {}
    for key, table in pieces.items():
        blob = orjson.dumps(table.to_json())
        hashed = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8)
        name = f"{hashed.hexdigest()}.{generation}.json"
        write_new(tables / name, blob)
        out[key] = [name, checksum(blob), len(table)]
    return out
