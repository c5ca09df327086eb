"""The files of one knowledge base on disk, written so that a reader never trusts half of them.

Layout of ``$DEEPTUTOR_HOME/kb/<name>/``::

    manifest.json          sources, root, per-file stamps, hashes and chunk ranges, checksums
    chunks-<gen>.jsonl     the chunk store: one Chunk per line, append-only
    index/                 bm25s's score matrix and vocabulary (``bm25s.BM25.save`` format),
                           plus each chunk's term ids and counts (doc_*.npy), so a refresh
                           re-tokenises only the files that changed

Rows of the index follow the manifest's ``files`` order, and each file's chunks are one
contiguous byte range of the chunk store (``offset``, ``length``, ``digest``). A refresh
appends the chunks of changed files to the store and leaves the rest where they are; once
less than half of the store is live it is copied, range by range, into a new generation.

Write order: the chunk store is appended to (bytes past the old manifest's ranges are never
read by anyone), the index goes to a temp folder and is swapped in by rename, and
manifest.json is replaced atomically, last. The manifest carries the SHA-256 of every index
file and of every file's chunk range, so a crash between two renames, a truncated file or a
hand edit shows up as a checksum mismatch, and the index is rebuilt instead of used. Index
files are checked when the index is opened; a chunk range when its chunks are read (a search
hit), so opening a big knowledge base does not hash every chunk.

bm25s and numpy are imported inside the functions that need them, never at module import.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from deeptutor_jupyter.knowledge.model import Chunk

MANIFEST = "manifest.json"
INDEX_DIR = "index"
MANIFEST_VERSION = 2
STORE_PREFIX = "chunks-"
# The arrays a refresh reuses; the rest of index/ is bm25s's own save format.
DOC_ARRAYS = ("doc_ptr.npy", "doc_terms.npy", "doc_tfs.npy")
K1, B = 1.5, 0.75  # bm25s's defaults (method "lucene")
# A file last written longer ago than this may be trusted by its stamp (see settled_stamps).
SETTLED_NS = 2_000_000_000


class CorruptIndex(Exception):
    """Internal: the files on disk do not agree with the manifest. The message says how."""


@dataclass
class Loaded:
    """A verified index: the manifest, the bm25s retriever (memory-mapped) and row lookup."""

    manifest: dict[str, Any]
    retriever: Any  # bm25s.BM25, or None for a knowledge base with no chunks
    folder: Path
    files: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    starts: Any = None  # numpy array: first row of each file
    _chunks: dict[int, list[Chunk]] = field(default_factory=dict)

    def chunk(self, row: int) -> Chunk:
        """The chunk of index row ``row``, read from its file's range and checked."""
        import numpy as np

        which = int(np.searchsorted(self.starts, row, side="right")) - 1
        if which not in self._chunks:
            if len(self._chunks) > 256:  # a search reads a handful; do not grow without bound
                self._chunks.clear()
            self._chunks[which] = read_range(self.folder, self.manifest, self.files[which][1])
        return self._chunks[which][row - int(self.starts[which])]


def sha256_file(path: Path) -> str:
    """The SHA-256 of a source file: what the manifest compares to see whether it changed."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checksum(data: bytes | memoryview) -> str:
    """The checksum of our own files and chunk ranges: BLAKE2b-256, about three times faster
    than SHA-256 here, and these are checked at every open and refresh."""
    return hashlib.blake2b(data, digest_size=32).hexdigest()


def checksum_file(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=32)
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def write_lock(folder: Path) -> Iterator[None]:
    """Serialise writers of one knowledge base (two kernels indexing at once).

    Readers take no lock: they verify checksums instead. Without fcntl (Windows) there is no
    lock, and the checksums still catch an interleaved write.
    """
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with (folder / ".lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


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
    for key, kind in (("sources", list), ("files", dict), ("root", str), ("chunks", int)):
        if not isinstance(data.get(key), kind):
            raise CorruptIndex(f"manifest.json: {key!r} is missing or malformed")
    if data.get("version") != MANIFEST_VERSION:
        # Sources and root are still good: the caller re-reads every file into the new format.
        raise CorruptIndex("the index was written by an older version")
    return data


def load_verified(
    folder: Path, tokenizer_version: int, *, for_search: bool = False, trust: bool = True
) -> Loaded:
    """The manifest and the memory-mapped index, after checking the index files' checksums.

    ``for_search`` leaves out the term arrays (``doc_*.npy``): a search never reads them, and a
    refresh, which does, opens the index without it. With ``trust``, a file whose stamp is the
    one recorded after it was last hashed is not hashed again (``settled_stamps``).
    """
    manifest = read_manifest(folder)
    if manifest.get("tokenizer") != tokenizer_version:
        raise CorruptIndex("the index was built with another tokenizer version")
    files = list(manifest["files"].items())
    starts = _row_starts(files, manifest["chunks"])
    store = manifest.get("store")
    if manifest["chunks"] == 0:
        return Loaded(manifest, None, folder, files, starts)
    if not isinstance(store, str) or not store.startswith(STORE_PREFIX):
        raise CorruptIndex("manifest.json names no chunk store")
    try:
        size = (folder / store).stat().st_size
    except FileNotFoundError as exc:
        raise CorruptIndex(f"{store} is missing") from exc
    if size < int(manifest.get("store_size", -1)):
        raise CorruptIndex(f"{store} is shorter than the manifest says")
    index = folder / INDEX_DIR
    _check_index_files(folder, manifest, DOC_ARRAYS if for_search else (), trust=trust)
    retriever = _load_retriever(index)
    if retriever.scores.get("num_docs") != manifest["chunks"]:
        raise CorruptIndex("the index and the manifest hold different numbers of chunks")
    return Loaded(manifest, retriever, folder, files, starts)


def _row_starts(files: list[tuple[str, dict[str, Any]]], total: int) -> Any:
    import numpy as np

    try:
        counts = np.fromiter((int(e["chunks"]) for _, e in files), np.int64, len(files))
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptIndex("manifest.json: a file entry is malformed") from exc
    if int(counts.sum()) != total or (counts < 0).any():
        raise CorruptIndex("chunk counts in manifest.json disagree")
    return np.concatenate(([0], np.cumsum(counts)[:-1])) if len(files) else counts


def file_stamp(path: Path) -> list[int]:
    st = path.stat()
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
            stamp = file_stamp(folder / name)
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
        return bool(file_stamp(folder / name) == recorded)
    except OSError:
        return False


def _check_index_files(
    folder: Path, manifest: dict[str, Any], skip: tuple[str, ...] = (), *, trust: bool = True
) -> None:
    index = folder / INDEX_DIR
    expected = manifest.get("index_files")
    if not isinstance(expected, dict) or not expected:
        raise CorruptIndex("manifest.json lists no index files")
    present = {p.name for p in index.iterdir()} if index.is_dir() else set()
    if present != set(expected):
        raise CorruptIndex(
            f"index files differ: expected {sorted(expected)}, found {sorted(present)}"
        )
    for name, digest in expected.items():
        if name in skip or (trust and trusted(folder, manifest, f"{INDEX_DIR}/{name}")):
            continue  # not needed to search (a refresh checks it), or unchanged since checked
        if checksum_file(index / name) != digest:
            raise CorruptIndex(f"index/{name} does not match its checksum")


def read_range(folder: Path, manifest: dict[str, Any], entry: dict[str, Any]) -> list[Chunk]:
    """The chunks of one file, checked against the digest of its byte range."""
    try:
        offset, length = int(entry["offset"]), int(entry["length"])
        with (folder / manifest["store"]).open("rb") as fh:
            fh.seek(offset)
            data = fh.read(length)
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise CorruptIndex(f"the chunk store cannot be read ({exc})") from exc
    if len(data) != length or checksum(data) != entry.get("digest"):
        raise CorruptIndex("a range of the chunk store does not match its checksum")
    try:
        chunks = [Chunk.from_json(orjson.loads(line)) for line in data.splitlines() if line]
    except (ValueError, TypeError) as exc:
        raise CorruptIndex(f"the chunk store cannot be parsed ({exc})") from exc
    if len(chunks) != entry.get("chunks"):
        raise CorruptIndex("a file's chunk count disagrees with the chunk store")
    return chunks


def check_ranges(folder: Path, manifest: dict[str, Any], *, trust: bool = True) -> None:
    """Every file's chunk range against its digest, in one sequential read of the store (a
    refresh reuses ranges without parsing them, so it checks them this way first)."""
    if not manifest["chunks"] or (trust and trusted(folder, manifest, str(manifest["store"]))):
        return
    try:
        data = (folder / manifest["store"]).read_bytes()
    except (OSError, KeyError, TypeError) as exc:
        raise CorruptIndex(f"the chunk store cannot be read ({exc})") from exc
    view = memoryview(data)
    for rel, entry in manifest["files"].items():
        try:
            offset, length = int(entry["offset"]), int(entry["length"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptIndex(f"manifest.json: the entry of {rel} is malformed") from exc
        part = view[offset : offset + length]
        if len(part) != length or checksum(part) != entry.get("digest"):
            raise CorruptIndex(f"the chunks of {rel} do not match their checksum")


def iter_chunks(folder: Path) -> Iterator[Chunk]:
    """Every chunk in index order (benchmarks and tests; search reads only its hits)."""
    manifest = read_manifest(folder)
    for entry in manifest["files"].values():
        yield from read_range(folder, manifest, entry)


def verify_all(folder: Path, tokenizer_version: int) -> Loaded:
    """``load_verified`` plus every chunk range and the doc arrays: the full check."""
    loaded = load_verified(folder, tokenizer_version, trust=False)
    for _, entry in loaded.files:
        if entry.get("chunks"):
            read_range(folder, loaded.manifest, entry)
    if loaded.retriever is not None:
        load_doc_arrays(folder, loaded.manifest)
    return loaded


def load_doc_arrays(folder: Path, manifest: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(doc_ptr, doc_terms, doc_tfs) of a verified index: each chunk's term ids and counts."""
    import numpy as np

    try:
        ptr, terms, tfs = (np.load(folder / INDEX_DIR / name) for name in DOC_ARRAYS)
    except (OSError, ValueError) as exc:
        raise CorruptIndex(f"the term arrays cannot be loaded ({exc})") from exc
    if len(ptr) != manifest["chunks"] + 1 or len(terms) != len(tfs) or ptr[-1] != len(terms):
        raise CorruptIndex("the term arrays do not match the manifest")
    return ptr, terms, tfs


def _load_retriever(index: Path) -> Any:
    import bm25s  # type: ignore[import-untyped]

    try:
        # Memory-mapped: the score matrix stays in the page cache, not in the kernel's heap.
        return bm25s.BM25.load(index, mmap=True, show_progress=False)
    except Exception as exc:  # bm25s and numpy raise many kinds on a damaged file
        raise CorruptIndex(f"the bm25s index cannot be loaded ({type(exc).__name__})") from exc


def bm25_scores(ptr: Any, terms: Any, tfs: Any, n_vocab: int) -> tuple[Any, Any, Any]:
    """bm25s's lucene scores as a term-major CSC matrix (data, indices, indptr), in numpy.

    The same numbers as ``bm25s.BM25().index`` (idf ``log(1 + (N - df + .5) / (df + .5))``,
    tf part ``tf / (tf + k1 (1 - b + b dl / avgdl))``) without its per-document Python loops.
    """
    import numpy as np

    n_docs = len(ptr) - 1
    docs = np.repeat(np.arange(n_docs, dtype=np.int32), np.diff(ptr))
    lengths = np.bincount(docs, weights=tfs, minlength=n_docs)
    avg = float(lengths.sum()) / max(n_docs, 1) or 1.0
    df = np.bincount(terms, minlength=n_vocab)
    idf = np.log(1 + (n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
    norm = (K1 * (1 - B + B * lengths / avg)).astype(np.float32)
    del lengths
    # In place, one array of temporaries at a time: at 50,000 files there are ~10^7 of each.
    data = tfs.astype(np.float32)
    denom = norm[docs]
    denom += data
    np.divide(data, denom, out=data)
    del denom
    data *= idf[terms]
    # Within one term's column the order of documents does not change a sum over it.
    order = np.argsort(terms, kind="quicksort")
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    return data[order], docs[order], indptr


def save_index(
    folder: Path, vocab: dict[str, int], ptr: Any, terms: Any, tfs: Any
) -> dict[str, str]:
    """Write the index to a staging folder and swap it in; the checksums of its files."""
    import bm25s
    import numpy as np

    data, indices, indptr = bm25_scores(ptr, terms, tfs, len(vocab))
    retriever = bm25s.BM25()
    retriever.scores = {
        "data": data,
        "indices": indices,
        "indptr": indptr,
        "num_docs": len(ptr) - 1,
    }
    retriever.vocab_dict = vocab
    retriever.nonoccurrence_array = None  # lucene needs none; save() reads the attribute
    staging = folder / f".index-new-{uuid.uuid4().hex}"
    retriever.save(staging, show_progress=False)
    for name, array in zip(DOC_ARRAYS, (ptr, terms, tfs), strict=True):
        np.save(staging / name, array)
    index_files = {p.name: checksum_file(p) for p in sorted(staging.iterdir())}
    _swap_in(staging, folder / INDEX_DIR)
    return index_files


def chunk_line(chunk: Chunk) -> bytes:
    return orjson.dumps(chunk.to_json()) + b"\n"


def new_store_name() -> str:
    return f"{STORE_PREFIX}{uuid.uuid4().hex[:12]}.jsonl"


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    body = orjson.dumps({**manifest, "version": MANIFEST_VERSION}, option=orjson.OPT_INDENT_2)
    atomic_write_bytes(folder / MANIFEST, body)


def remove_old_stores(folder: Path, keep: set[str]) -> None:
    """Delete chunk stores other than ``keep`` (the current one and the one before it, which
    a reader holding the previous manifest may still be reading)."""
    for path in folder.glob(f"{STORE_PREFIX}*.jsonl"):
        if path.name not in keep:
            path.unlink(missing_ok=True)


def _swap_in(staging: Path, target: Path) -> None:
    # rename() cannot replace a non-empty folder, so the old one steps aside first. A crash
    # between the two renames leaves no index/ at all, which the checksums report.
    old = target.with_name(f".index-old-{uuid.uuid4().hex}")
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)


def remove_leftovers(folder: Path) -> None:
    # Staging folders and temp files from an interrupted write; only a writer (under the lock)
    # removes them, so no other writer's staging folder can be in use.
    for leftover in folder.glob(".index-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    for leftover in folder.glob(".*.tmp"):
        leftover.unlink(missing_ok=True)
    (folder / "chunks.jsonl").unlink(missing_ok=True)  # the store of manifest version 1
