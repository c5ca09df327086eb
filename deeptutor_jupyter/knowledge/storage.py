"""The files of one knowledge base on disk, written so that a reader never trusts half of them.

Layout of ``$DEEPTUTOR_HOME/kb/<name>/``::

    manifest.json          sources, root, checksums, and which pieces hold the file table
    tables/                the file table (per-file stamps, hashes and chunk ranges, by
                           column: ``knowledge/filetable.py``) in pieces of one folder, or of
                           a bucket of a big one (``knowledge/shards.py``), each named by the
                           write that made it: a refresh of a few paths reads and writes
                           only their pieces
    chunks-<gen>.jsonl     the chunk store: one Chunk per line, append-only
    index/                 term counts by row and by term, in a base and a delta segment,
                           and the vocabulary (``knowledge/bm25.py``), so a refresh
                           re-tokenises only the files that changed and rewrites only the
                           delta: four files (``knowledge/arrays.py``), each named by
                           the write that made it (``delta.<gen>.arrays``); the manifest
                           says which are current

Each file's chunks are consecutive rows of the index (its ``row`` is the first) and one
contiguous byte range of the chunk store (``offset``, ``length``, ``digest``). A refresh
appends the chunks of changed files to the store and leaves the rest where they are; once
less than half of the store is live it is copied, range by range, into a new generation.

Write order: the chunk store is appended to (bytes past the old manifest's ranges are never
read by anyone), the index files and pieces of the file table that changed are written under
new names beside the ones they replace, and manifest.json is replaced atomically, last. Only
then are files named by neither this manifest nor the one before it deleted, so a reader still
holding the previous manifest finds every file it names. The manifest carries the checksum
(BLAKE2b) of every index file and piece of the table, which carry that of every file's chunk
range, so a write cut short by a crash, a truncated file or a hand edit shows up as a checksum
mismatch, and the index is rebuilt instead of used. Index files are checked when the index is
opened; a chunk range when its chunks are read (a search hit), so opening a big knowledge base
does not hash every chunk.

numpy is imported inside the functions that need it, never at module import.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import hashlib
import os
import shutil
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from deeptutor_jupyter._files import (
    DIR_MODE,
    atomic_write_bytes,
    locked,
    write_new,
)
from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.knowledge import shards
from deeptutor_jupyter.knowledge.filetable import COLUMNS, FileTable
from deeptutor_jupyter.knowledge.model import Chunk

MANIFEST = "manifest.json"
INDEX_DIR = "index"
MANIFEST_VERSION = 4  # 3: index arrays in files named by generation; 4: the table in pieces
STORE_PREFIX = "chunks-"
# The arrays only a refresh reads: a search leaves their checksum to it.
DOC_ARRAYS = ("basedoc",)
# A file last written longer ago than this may be trusted by its stamp (see settled_stamps).
SETTLED_NS = 2_000_000_000


OLDER_VERSION = "the index was written by an older version"


class CorruptIndex(DeepTutorError):
    """Internal: the files on disk do not agree with the manifest. The message says how."""

    code = "corrupt_index"


@dataclass
class Loaded:
    """A verified index: the manifest, the memory-mapped index and row lookup."""

    manifest: dict[str, Any]
    index: Any  # bm25.Index, or None for a knowledge base with no chunks
    folder: Path
    table: FileTable = field(default_factory=FileTable)
    starts: Any = None  # numpy array: first row of each file with chunks, ascending
    owners: Any = None  # numpy array: row in ``table`` of each of those
    _lines: dict[int, list[bytes]] = field(default_factory=dict)

    def chunk(self, row: int) -> Chunk:
        """The chunk of index row ``row``, read from its file's range (checked) and parsed."""
        import numpy as np

        at = int(np.searchsorted(self.starts, row, side="right")) - 1
        which = int(self.owners[at])
        lines = self._lines.get(which)
        if lines is None:
            if len(self._lines) > 256:  # a search reads a handful; do not grow without bound
                self._lines.clear()
            entry = self.table.entry(which)
            lines = self._lines[which] = _range_lines(self.folder / self.manifest["store"], entry)
        try:
            return Chunk.from_json(orjson.loads(lines[row - int(self.starts[at])]))
        except (ValueError, TypeError) as exc:
            raise CorruptIndex(f"the chunk store cannot be parsed ({exc})") from exc


def _range_lines(store: Path, entry: dict[str, Any]) -> list[bytes]:
    """The lines of one file's range of the chunk store, checked against its digest."""
    try:
        offset, length = int(entry["offset"]), int(entry["length"])
        with store.open("rb") as fh:
            data = os.pread(fh.fileno(), length, offset)
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise CorruptIndex(f"the chunk store cannot be read ({exc})") from exc
    if len(data) != length or checksum(data) != entry.get("digest"):
        raise CorruptIndex("a range of the chunk store does not match its checksum")
    lines = [line for line in data.splitlines() if line]
    if len(lines) != entry.get("chunks"):
        raise CorruptIndex("a file's chunk count disagrees with the chunk store")
    return lines


def read_source(
    path: str, *, expect: os.stat_result | None = None, limit: int | None = None
) -> tuple[bytes, str]:
    """A source file's bytes and their SHA-256, in one read: the hash says whether it changed,
    and the same bytes are chunked when it did.

    The file may have been swapped since it was found (discover.py): it is opened without
    following a link (``O_NOFOLLOW``) and without waiting on a FIFO (``O_NONBLOCK``), and
    the open descriptor must be a regular file, the same one that was found (``expect``: its
    device and inode), no larger than ``limit``. A folder on the way swapped for a link gives
    another inode, so it is refused too. OSError (with a reason) otherwise.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "it became a link after it was found") from None
        raise
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (it was replaced after it was found)")
        if expect is not None and (st.st_dev, st.st_ino) != (expect.st_dev, expect.st_ino):
            raise OSError(errno.ESTALE, "it was replaced after it was found; refresh again")
        os.set_blocking(fd, True)
        data = fh.read() if limit is None else fh.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit // 2**20} MB")
    return data, hashlib.sha256(data).hexdigest()


def checksum(data: bytes | memoryview) -> str:
    """The checksum of our own files and chunk ranges: BLAKE2b-256, about three times faster
    than SHA-256 here, and these are checked at every open and refresh."""
    return hashlib.blake2b(data, digest_size=32).hexdigest()


def new_checksum() -> Any:
    return hashlib.blake2b(digest_size=32)


def checksum_file(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=32)
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def write_lock(folder: Path) -> Iterator[None]:
    """Serialise writers of one knowledge base (two kernels indexing at once).

    Readers take no lock: they verify checksums instead. Without fcntl (Windows) there is no
    lock, and the checksums still catch an interleaved write.
    """
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder / ".lock"):
        yield


def read_manifest(folder: Path) -> dict[str, Any]:
    """The parsed manifest; CorruptIndex when it is missing, unreadable or of another shape."""
    try:
        data = orjson.loads((folder / MANIFEST).read_bytes())
    except FileNotFoundError as exc:
        raise CorruptIndex("manifest.json is missing") from exc
    except (OSError, ValueError) as exc:
        raise CorruptIndex(f"manifest.json cannot be read ({exc})") from exc
    if not isinstance(data, dict):
        raise CorruptIndex("manifest.json has an unknown format")
    _check_keys(data, {"sources": list, "root": str, "chunks": int})
    if data.get("version") != MANIFEST_VERSION:
        # Sources and root are still good: the caller re-reads every file into the new format.
        raise CorruptIndex(OLDER_VERSION)
    _check_keys(data, {"shards": dict, "buckets": dict, "n_files": int, "store_live": int})
    for entry in data["shards"].values():
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)):
            raise CorruptIndex("manifest.json: a piece of the file table is malformed")
    if not all(isinstance(n, int) and n > 0 for n in data["buckets"].values()):
        raise CorruptIndex("manifest.json: 'buckets' is malformed")
    return data


def _check_keys(data: dict[str, Any], kinds: dict[str, type]) -> None:
    for key, kind in kinds.items():
        if not isinstance(data.get(key), kind):
            raise CorruptIndex(f"manifest.json: {key!r} is missing or malformed")


def read_tables(folder: Path, manifest: dict[str, Any], keys: Any) -> dict[str, FileTable]:
    """Pieces of the file table (``knowledge/shards.py``), checked; CorruptIndex otherwise."""
    try:
        return shards.read_pieces(folder, manifest, keys, checksum)
    except (ValueError, KeyError) as exc:
        raise CorruptIndex(f"the file table: {exc}") from exc


def whole_table(folder: Path, manifest: dict[str, Any]) -> FileTable:
    """Every piece of the file table as one table, in key order (a search, a full check)."""
    pieces = read_tables(folder, manifest, sorted(manifest["shards"]))
    return concat(list(pieces.values()))


def concat(tables: list[FileTable]) -> FileTable:
    if len(tables) == 1:
        return tables[0]
    return FileTable({n: [v for t in tables for v in getattr(t, n)] for n in COLUMNS})


def load_verified(
    folder: Path,
    tokenizer_version: int,
    *,
    for_search: bool = False,
    trust: bool = True,
    open_index: bool = True,
    tables: bool = True,
) -> Loaded:
    """The manifest and the memory-mapped index, after checking the index files' checksums.

    ``for_search`` leaves out the base's term arrays (the ``basedoc`` file): a search never
    reads them, and a refresh, which does, opens the index without it. With ``trust``, a file
    whose stamp is the one recorded after it was last hashed is not hashed again
    (``settled_stamps``).
    ``open_index=False`` checks the files but opens none of them (``index`` stays None): a
    refresh reads only the arrays it needs, and only when a file changed. ``tables=False``
    reads no piece of the file table (``table`` stays empty): a refresh reads the pieces of
    what it looks at.
    """
    manifest = read_manifest(folder)
    if manifest.get("tokenizer") != tokenizer_version:
        raise CorruptIndex("the index was built with another tokenizer version")
    table = whole_table(folder, manifest) if tables else FileTable()
    starts, owners = (
        _row_starts(table, manifest["chunks"], int(manifest.get("rows", 0)))
        if tables
        else (None, None)
    )
    store = manifest.get("store")
    if manifest["chunks"] == 0:
        return Loaded(manifest, None, folder, table, starts, owners)
    if not isinstance(store, str) or not store.startswith(STORE_PREFIX):
        raise CorruptIndex("manifest.json names no chunk store")
    try:
        size = (folder / store).stat().st_size
    except FileNotFoundError as exc:
        raise CorruptIndex(f"{store} is missing") from exc
    if size < int(manifest.get("store_size", -1)):
        raise CorruptIndex(f"{store} is shorter than the manifest says")
    _check_index_files(folder, manifest, DOC_ARRAYS if for_search else (), trust=trust)
    if not open_index:
        return Loaded(manifest, None, folder, table, starts, owners)
    index = _open_index(folder / INDEX_DIR, index_names(manifest))
    live = index.rows - int(index.dead.sum())
    if index.rows != manifest.get("rows") or live != manifest["chunks"]:
        raise CorruptIndex("the index and the manifest hold different numbers of chunks")
    return Loaded(manifest, index, folder, table, starts, owners)


def _row_starts(table: FileTable, total: int, rows_total: int) -> tuple[Any, Any]:
    """(first rows, owning table rows) of the files with chunks, by row; checks that the
    files' rows do not overlap and lie inside the index."""
    import numpy as np

    try:
        rows = np.array(table.row, dtype=np.int64)
        counts = np.array(table.chunks, dtype=np.int64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise CorruptIndex("manifest.json: a file entry is malformed") from exc
    if rows.ndim != 1 or counts.ndim != 1:
        raise CorruptIndex("manifest.json: a file entry is malformed")
    if int(counts.sum()) != total or (counts < 0).any():
        raise CorruptIndex("chunk counts in manifest.json disagree")
    owners = np.flatnonzero(counts)
    owners = owners[np.argsort(rows[owners], kind="stable")]
    starts, ends = rows[owners], rows[owners] + counts[owners]
    if (starts[1:] < ends[:-1]).any() or (len(ends) and (starts[0] < 0 or ends[-1] > rows_total)):
        raise CorruptIndex("manifest.json: a file's rows overlap another's or lie outside")
    return starts, owners


def file_stamp(path: Path | str) -> list[int]:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def settled_stamps(folder: Path, manifest: dict[str, Any]) -> dict[str, list[int]]:
    """Stamps of the index files and chunk store last written more than ``SETTLED_NS`` ago.

    Recorded in the manifest after those files were hashed, they let later opens skip the hash
    while the stamp is unchanged: every write moves a file's stamp, except a second write within
    the same tick of the file-system clock as the first. A file is therefore recorded only once
    it is older than any tick (the same rule as git's "racily clean" index entries).
    """
    now = time.time_ns()
    names = [f"{INDEX_DIR}/{n}" for n in manifest.get("index_files") or {}]
    if manifest.get("store"):
        names.append(str(manifest["store"]))
    out: dict[str, list[int]] = {}
    for name in names:
        try:
            stamp = file_stamp(f"{folder}/{name}")
        except OSError:
            continue
        if now - stamp[1] > SETTLED_NS:
            out[name] = stamp
    return out


def trusted(folder: Path, manifest: dict[str, Any], name: str) -> bool:
    """True when ``name`` still has the stamp recorded after it was last verified."""
    stamps = manifest.get("stamps")
    recorded = stamps.get(name) if isinstance(stamps, dict) else None
    if not recorded:
        return False
    try:
        return bool(file_stamp(f"{folder}/{name}") == recorded)
    except OSError:
        return False


def index_names(manifest: dict[str, Any]) -> dict[str, str]:
    """Each part of the index (``bm25.PARTS``: ``delta``) -> the file holding it now
    (``delta.<gen>.arrays``)."""
    return {str(name).partition(".")[0]: str(name) for name in manifest.get("index_files") or {}}


def _check_index_files(
    folder: Path, manifest: dict[str, Any], skip: tuple[str, ...] = (), *, trust: bool = True
) -> None:
    from deeptutor_jupyter.knowledge.bm25 import PARTS

    index = folder / INDEX_DIR
    expected = manifest.get("index_files")
    if not isinstance(expected, dict) or not expected:
        raise CorruptIndex("manifest.json lists no index files")
    names = index_names(manifest)
    if set(names) != set(PARTS) or len(names) != len(expected):
        raise CorruptIndex(f"manifest.json lists other index files: {sorted(expected)}")
    present = set(os.listdir(index)) if index.is_dir() else set()
    if not present.issuperset(expected):
        raise CorruptIndex(f"index files are missing: {sorted(set(expected) - present)}")
    for name, file in names.items():
        if name in skip or (trust and trusted(folder, manifest, f"{INDEX_DIR}/{file}")):
            continue  # not needed to search (a refresh checks it), or unchanged since checked
        if checksum_file(index / file) != expected[file]:
            raise CorruptIndex(f"index/{file} does not match its checksum")


def read_range(folder: Path, manifest: dict[str, Any], entry: dict[str, Any]) -> list[Chunk]:
    """The chunks of one file, checked against the digest of its byte range."""
    try:
        store = folder / manifest["store"]
    except (KeyError, TypeError) as exc:
        raise CorruptIndex(f"the chunk store cannot be read ({exc})") from exc
    try:
        return [Chunk.from_json(orjson.loads(line)) for line in _range_lines(store, entry)]
    except (ValueError, TypeError) as exc:
        raise CorruptIndex(f"the chunk store cannot be parsed ({exc})") from exc


def check_ranges(
    folder: Path,
    manifest: dict[str, Any],
    table: FileTable,
    *,
    trust: bool = True,
    whole: bool = True,
) -> None:
    """The chunk store against its checksums, in one sequential read, and the ranges of the
    files of ``table`` inside it (a refresh reuses ranges without parsing them, so it checks
    them this way first). ``whole=False`` (a refresh of a few paths): only the ranges of
    ``table``, each against its own checksum, so the check follows what is looked at; the
    ranges of other files are checked when a search reads them."""
    if not manifest["chunks"] or (trust and trusted(folder, manifest, str(manifest["store"]))):
        return
    if not whole:
        store = folder / str(manifest["store"])
        for i in range(len(table)):
            if table.chunks[i]:
                _range_lines(store, table.entry(i))
        return
    try:
        data = (folder / manifest["store"]).read_bytes()
    except (OSError, KeyError, TypeError) as exc:
        raise CorruptIndex(f"the chunk store cannot be read ({exc})") from exc
    view = memoryview(data)
    blocks = manifest.get("blocks")
    if isinstance(blocks, list) and blocks:
        _check_blocks(view, table, blocks)
        return
    for i, rel, offset, length in _ranges(table):
        part = view[offset : offset + length]
        if len(part) != length or checksum(part) != table.digest[i]:
            raise CorruptIndex(f"the chunks of {rel} do not match their checksum")


def _check_blocks(view: memoryview, table: FileTable, blocks: list[Any]) -> None:
    """The store's append batches against their checksums, and every range inside one."""
    try:
        spans = sorted((int(a), int(b), str(d)) for a, b, d in blocks)
    except (TypeError, ValueError) as exc:
        raise CorruptIndex("manifest.json: the chunk store's blocks are malformed") from exc
    for start, end, digest in spans:
        part = view[start:end]
        if len(part) != end - start or checksum(part) != digest:
            raise CorruptIndex("the chunk store does not match its checksums")
    starts = [start for start, _, _ in spans]
    for _, rel, offset, length in _ranges(table):
        if not length:
            continue
        at = bisect.bisect_right(starts, offset) - 1
        if at < 0 or offset + length > spans[at][1]:
            raise CorruptIndex(f"the chunks of {rel} lie outside the checked store")


def _ranges(table: FileTable) -> Iterator[tuple[int, str, int, int]]:
    """(row, path, offset, length) of every file's range of the chunk store."""
    for i, rel in enumerate(table.path):
        try:
            yield i, rel, int(table.offset[i]), int(table.length[i])
        except (TypeError, ValueError) as exc:
            raise CorruptIndex(f"manifest.json: the entry of {rel} is malformed") from exc


def iter_chunks(folder: Path) -> Iterator[Chunk]:
    """Every chunk in index order (benchmarks and tests; search reads only its hits)."""
    manifest = read_manifest(folder)
    table = whole_table(folder, manifest)
    for i in sorted(range(len(table)), key=table.path.__getitem__):  # in path order
        yield from read_range(folder, manifest, table.entry(i))


def verify_all(folder: Path, tokenizer_version: int) -> Loaded:
    """``load_verified`` plus every chunk range and the doc arrays: the full check."""
    loaded = load_verified(folder, tokenizer_version, trust=False)
    for i, chunks in enumerate(loaded.table.chunks):
        if chunks:
            read_range(folder, loaded.manifest, loaded.table.entry(i))
    return loaded


def load_arrays(folder: Path, manifest: dict[str, Any], names: tuple[str, ...]) -> list[Any]:
    """Arrays of a verified index by name, memory-mapped (a refresh reads a few slices of
    them); each file holding one of them is opened once."""
    from deeptutor_jupyter.knowledge.arrays import open_arrays
    from deeptutor_jupyter.knowledge.bm25 import GROUPS

    files = index_names(manifest)
    group_of = {name: group for group, members in GROUPS.items() for name in members}
    opened: dict[str, dict[str, Any]] = {}
    try:
        for name in names:
            group = group_of[name]
            if group not in opened:
                opened[group] = open_arrays(folder / INDEX_DIR / files[group])
        return [opened[group_of[name]][name] for name in names]
    except (OSError, ValueError, KeyError) as exc:
        raise CorruptIndex(f"the index arrays cannot be loaded ({exc})") from exc


def load_vocab(folder: Path, manifest: dict[str, Any]) -> list[str]:
    """The terms of a verified index, in id order."""
    try:
        file = index_names(manifest)["vocab"]
        terms = orjson.loads((folder / INDEX_DIR / file).read_bytes())
    except (OSError, ValueError, KeyError) as exc:
        raise CorruptIndex(f"the vocabulary cannot be read ({exc})") from exc
    if not isinstance(terms, list):
        raise CorruptIndex("the vocabulary has an unknown format")
    return terms


def _open_index(index: Path, files: dict[str, str]) -> Any:
    from deeptutor_jupyter.knowledge.bm25 import Index

    try:
        return Index.open(index, files)
    except Exception as exc:  # numpy and orjson raise many kinds on a damaged file
        raise CorruptIndex(f"the index cannot be loaded ({type(exc).__name__}: {exc})") from exc


def save_index(
    folder: Path,
    arrays: dict[str, Any],
    terms: list[str] | None,
    keep: dict[str, str],
) -> dict[str, str]:
    """Write the index files that changed under new names; the checksums of the index's files.

    ``arrays`` go into one file per group (``bm25.GROUPS``) they fill. ``keep`` names files of
    the current index to carry over unchanged (the base, and the vocabulary when ``terms`` is
    None), with their checksums: they stay as they are, so their stamps stay those recorded.
    Nothing is renamed or deleted here: the manifest written after this names the new files,
    and ``remove_old_index_files`` clears what it no longer needs.
    """
    from deeptutor_jupyter.knowledge.arrays import write_arrays
    from deeptutor_jupyter.knowledge.bm25 import GROUPS

    index = folder / INDEX_DIR
    if not index.is_dir():
        index.mkdir()
        os.chmod(index, DIR_MODE)  # mkdir's mode is filtered by the umask
    generation = uuid.uuid4().hex[:12]
    index_files = dict(keep)
    for group, members in GROUPS.items():
        if not any(name in arrays for name in members):
            continue
        file = f"{group}.{generation}.arrays"
        digest = new_checksum()
        write_arrays(index / file, {name: arrays[name] for name in members}, digest)
        index_files[file] = digest.hexdigest()
    if terms is not None:
        blob = orjson.dumps(terms)
        file = f"vocab.{generation}.json"
        write_new(index / file, blob)
        index_files[file] = checksum(blob)
    return dict(sorted(index_files.items()))


def remove_old_pieces(folder: Path, keep: set[str]) -> None:
    """Delete pieces of the file table other than ``keep`` (named by the current manifest or
    the previous one, which a reader may still be using)."""
    _remove_except(folder / shards.TABLES_DIR, keep, lambda name: True)


def remove_old_index_files(folder: Path, keep: set[str]) -> None:
    """Delete index files other than ``keep`` (the current manifest's and the previous one's,
    which a reader may still be using), and those of a write that was interrupted."""
    _remove_except(folder / INDEX_DIR, keep, lambda name: True)


def chunk_line(chunk: Chunk) -> bytes:
    return orjson.dumps(chunk.to_json()) + b"\n"


def new_store_name() -> str:
    return f"{STORE_PREFIX}{uuid.uuid4().hex[:12]}.jsonl"


def write_manifest(folder: Path, manifest: dict[str, Any], *, sources_changed: bool) -> None:
    """Replace manifest.json. Its bytes are always fsynced before the rename (a manifest lost
    to a crash would lose the learner's list of sources); the rename itself is made durable
    only when ``sources_changed``: a refresh lost to a crash leaves the previous manifest,
    whose files are all kept until the next write, and the next refresh does it again."""
    body = orjson.dumps({**manifest, "version": MANIFEST_VERSION})
    atomic_write_bytes(folder / MANIFEST, body, durable_rename=sources_changed)


def remove_old_stores(folder: Path, keep: set[str]) -> None:
    """Delete chunk stores other than ``keep`` (the current one and the one before it, which
    a reader holding the previous manifest may still be reading)."""
    _remove_except(
        folder, keep, lambda name: name.startswith(STORE_PREFIX) and name.endswith(".jsonl")
    )


def _remove_except(folder: Path, keep: set[str], ours: Callable[[str], bool]) -> None:
    """Unlink the files of ``folder`` that ``ours`` claims, except those in ``keep``."""
    try:
        present = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in present:
        if name not in keep and ours(name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / name)


def remove_leftovers(folder: Path) -> None:
    # Staging folders (of versions that swapped index folders), temp files from an interrupted
    # write and the store of manifest version 1; only a writer (under the lock) removes them,
    # so none is in use. One listing: this runs at every write.
    for name in os.listdir(folder):
        if name.startswith(".index-"):
            shutil.rmtree(folder / name, ignore_errors=True)
        elif (name.startswith(".") and name.endswith(".tmp")) or name == "chunks.jsonl":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / name)
