"""A named knowledge base: remembered sources, an incremental BM25 index, and search.

A refresh costs what changed, not what is kept (layout in ``knowledge/storage.py``):

* each file's size and ``mtime_ns`` are in the manifest; a file whose stamp is unchanged is not
  read at all, and one whose stamp moved is hashed and re-read only if its SHA-256 changed;
* the chunks of unchanged files stay where they are in the append-only chunk store;
* each chunk's term ids and counts are kept (``index/doc_*.npy``), so only changed files are
  tokenised; the BM25 matrix is then recomputed from those arrays with numpy, which costs
  milliseconds per thousand files.

Rows follow the discovery order of the files, whatever was reused, so a refresh gives the same
index (and the same search results) as a full rebuild of the same files.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deeptutor_jupyter.knowledge import storage
from deeptutor_jupyter.knowledge.ingest import (
    SUPPORTED_SUFFIXES,
    IngestError,
    ingest_file,
    relative_path,
)
from deeptutor_jupyter.knowledge.model import (
    Hit,
    IndexReport,
    KnowledgeBaseNotFound,
    KnowledgeIndexError,
    validate_kb_name,
)
from deeptutor_jupyter.knowledge.tokenize import (
    TOKENIZER_VERSION,
    Vocabulary,
    token_ids,
    tokenize,
)

__all__ = ["KnowledgeBase", "Progress", "list_kbs", "remove_kb"]

# progress(done, total, current_file): done and total are bytes of the files being indexed.
Progress = Callable[[int, int, str], None]

# Folders never worth indexing: VCS data, caches, checkpoints (names starting with "." too).
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})
MAX_FILE_BYTES = 50 * 1024 * 1024
_PROGRESS_STEP = 1 << 20  # inside a big file, report every MiB tokenised
BASE_DOC = ("base_doc_ptr.npy", "base_doc_terms.npy", "base_doc_tfs.npy")


@dataclass
class _Previous:
    """What a re-index may reuse: the verified index, or nothing (``damage`` says why)."""

    manifest: dict[str, Any] | None = None
    loaded: storage.Loaded | None = None
    damage: str | None = None


@dataclass
class _Build:
    """The new index as it is assembled, file by file, in row order."""

    entries: dict[str, Any] = field(default_factory=dict)
    # (kind, first, rows, rel), one per file with chunks, in the files' order: "old" with the
    # file's first row in the previous index, "new" with its first doc among the new ones
    segments: list[tuple[str, int, int, str]] = field(default_factory=list)
    ids: array[int] = field(default_factory=lambda: array("i"))
    doc_lengths: array[int] = field(default_factory=lambda: array("q"))
    stamps_moved: bool = False


class KnowledgeBase:
    """``home / "kb" / name``. Nothing is written until the first ``add_sources``.

    ``root`` is the folder chunk paths are relative to. It is fixed when the knowledge base is
    created (default: the current directory, which in a kernel is the notebook's folder) and
    read from the manifest afterwards, so paths and chunk ids never shift under an index.
    """

    def __init__(self, home: Path, name: str, *, root: Path | None = None) -> None:
        self.name = validate_kb_name(name)
        self.home = Path(home).expanduser()
        self.folder = self.home / "kb" / self.name
        self._new_root = Path(root) if root is not None else None
        self._cache: tuple[tuple[int, int, int], storage.Loaded] | None = None
        # Set when search() had to rebuild a damaged index, so the caller can say so.
        self.last_report: IndexReport | None = None

    @property
    def exists(self) -> bool:
        return (self.folder / storage.MANIFEST).exists()

    # --- writing --------------------------------------------------------------------------------

    def add_sources(self, paths: list[Path], progress: Progress | None = None) -> IndexReport:
        """Remember ``paths`` (folders or files) as sources and bring the index up to date.

        ``progress(done, total, current_file)`` is called with done=0 before the first file,
        after each file and every MiB inside a big one (done and total in bytes); the index is
        written after the last call.
        """
        new = [Path(p).expanduser().absolute() for p in paths]
        with storage.write_lock(self.folder):
            previous = self._previous_state()
            old = previous.manifest
            report = IndexReport(rebuilt_from_corruption=previous.damage is not None)
            if previous.damage and old is None:
                report.errors.append(
                    f"the previous index was unreadable ({previous.damage}); "
                    "its sources are forgotten"
                )
            sources = _merge(old["sources"] if old else [], [str(p.resolve()) for p in new])
            root = Path(old["root"]) if old else (self._new_root or Path.cwd()).resolve()
            return self._reindex(previous, sources, root, report, progress)

    def refresh(self, progress: Progress | None = None) -> IndexReport:
        """Re-scan the remembered sources: new, changed and deleted files are picked up."""
        return self._refresh(progress)

    def _refresh(self, progress: Progress | None = None, *, rebuild: str = "") -> IndexReport:
        with storage.write_lock(self.folder):
            previous = self._previous_state()
            if rebuild and previous.damage is None:
                previous = _Previous(previous.manifest, None, rebuild)
            old = previous.manifest
            if old is None:
                raise self._unusable(previous.damage)
            report = IndexReport(rebuilt_from_corruption=previous.damage is not None)
            return self._reindex(previous, old["sources"], Path(old["root"]), report, progress)

    def _files_on_disk(self) -> list[Path]:
        return [p for p in self.folder.iterdir() if p.name != ".lock"]

    def _previous_state(self) -> _Previous:
        if not self.folder.exists() or not self._files_on_disk():
            return _Previous()
        try:
            loaded = storage.load_verified(self.folder, TOKENIZER_VERSION)
            storage.check_ranges(self.folder, loaded.manifest)
        except storage.CorruptIndex as exc:
            try:
                manifest: dict[str, Any] | None = storage.read_manifest(self.folder)
            except storage.CorruptIndex as again:
                manifest = _old_manifest(self.folder) if "older version" in str(again) else None
            return _Previous(manifest, None, str(exc))  # nothing on disk is trusted
        return _Previous(loaded.manifest, loaded, None)

    def _unusable(self, damage: str | None) -> KnowledgeIndexError:
        if damage is None:
            return KnowledgeBaseNotFound(
                f"No knowledge base named {self.name!r}; create it with "
                f"%tutor kb add {self.name} <folder-or-files>"
            )
        return KnowledgeIndexError(
            f"The knowledge base {self.name!r} is damaged ({damage}) and its list of sources "
            f"is lost; remove it (%tutor kb remove {self.name}) and add its sources again"
        )

    def _reindex(
        self,
        previous: _Previous,
        sources: list[str],
        root: Path,
        report: IndexReport,
        progress: Progress | None,
    ) -> IndexReport:
        old = previous.manifest
        files = _discover(sources, report.errors)
        if report.rebuilt_from_corruption and old and old["files"] and not files:
            raise KnowledgeIndexError(
                f"The index of {self.name!r} is damaged and cannot be rebuilt: none of its "
                f"sources exist any more ({', '.join(sources)}). Remove it with "
                f"%tutor kb remove {self.name}"
            )
        loaded = previous.loaded
        old_files: dict[str, Any] = loaded.manifest["files"] if loaded else {}
        writer = _StoreWriter(self.folder, loaded.manifest if loaded else None)
        vocab = Vocabulary(loaded.index.vocab if loaded and loaded.index else None)
        build = _Build()
        total = sum(st.st_size for _, st in files)
        prefix = str(root).rstrip("/") + "/"
        done = 0
        if progress:
            progress(0, total, "")
        try:
            for name, st in files:
                # Plain strings until a file has to be opened: 50,000 Path objects cost more
                # than the stat calls of a refresh with nothing changed.
                rel = (
                    name[len(prefix) :]
                    if name.startswith(prefix)
                    else relative_path(Path(name), root)
                )
                tick = _Ticker(progress, done, total, rel)
                self._index_file(name, st, rel, root, old_files, build, writer, vocab, report, tick)
                done += st.st_size
                if progress:
                    progress(done, total, rel)
            report.removed = len(set(old_files) - set(build.entries))
            report.chunks = sum(int(e["chunks"]) for e in build.entries.values())
            if report.changed or old is None or old.get("sources") != sources:
                self._write(old, previous, sources, root, build, writer, vocab)
            elif loaded is not None:
                self._remember_stamps(loaded.manifest, build)
        finally:
            writer.close()
        return report

    def _index_file(
        self,
        path: str,
        st: os.stat_result,
        rel: str,
        root: Path,
        old_files: dict[str, Any],
        build: _Build,
        writer: _StoreWriter,
        vocab: Vocabulary,
        report: IndexReport,
        tick: _Ticker,
    ) -> None:
        previous = old_files.get(rel)
        if (
            previous is not None
            and previous.get("size") == st.st_size
            and previous.get("mtime_ns") == st.st_mtime_ns
        ):  # the common case of a refresh, kept short: same stamp, same entry, same rows
            report.unchanged += 1
            if previous["chunks"]:
                build.segments.append(("old", int(previous["row"]), int(previous["chunks"]), rel))
            build.entries[rel] = previous
            return
        try:
            stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
            same_stamp = (
                previous is not None
                and previous.get("size") == st.st_size
                and previous.get("mtime_ns") == st.st_mtime_ns
            )
            digest = (
                previous["sha256"] if same_stamp and previous else storage.sha256_file(Path(path))
            )
        except OSError as exc:
            report.errors.append(f"{rel}: cannot be read ({exc.strerror or exc})")
            return
        if previous is not None and previous.get("sha256") == digest:
            report.unchanged += 1
            entry = {**previous, **stamp}
            build.stamps_moved |= not same_stamp
            entry.update(writer.keep(previous))
            if entry["chunks"]:
                build.segments.append(("old", int(entry["row"]), int(entry["chunks"]), rel))
            build.entries[rel] = entry
            return
        try:
            found = ingest_file(Path(path), root, self.name)
        except IngestError as exc:
            report.errors.append(str(exc))
            return
        if previous:
            report.updated += 1
        else:
            report.added += 1
        first_doc = len(build.doc_lengths)
        lines: list[bytes] = []
        read = 0
        for chunk in found:
            ids = token_ids(f"{chunk.title}\n{chunk.text}", vocab)
            build.ids.extend(ids)
            build.doc_lengths.append(len(ids))
            lines.append(storage.chunk_line(chunk))
            read += len(chunk.text)
            if read >= _PROGRESS_STEP:
                tick(read)
        if found:
            build.segments.append(("new", first_doc, len(found), rel))
        entry = {"sha256": digest, **stamp, "source": path, "chunks": len(found), "row": 0}
        entry.update(writer.append(b"".join(lines)))
        build.entries[rel] = entry

    def _remember_stamps(self, manifest: dict[str, Any], build: _Build) -> None:
        """Nothing changed: record touched-but-identical files' new stamps, and the stamps of
        index files and store just verified, so the next open need not hash them again."""
        settled = storage.settled_stamps(self.folder, manifest)
        if not build.stamps_moved and settled == manifest.get("stamps", {}):
            return  # nothing to record: leave the manifest alone
        storage.write_manifest(self.folder, {**manifest, "files": build.entries, "stamps": settled})

    def _write(
        self,
        old: dict[str, Any] | None,
        previous: _Previous,
        sources: list[str],
        root: Path,
        build: _Build,
        writer: _StoreWriter,
        vocab: Vocabulary,
    ) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        store = writer.finish(build.entries)
        n_docs = sum(n for _, _, n, _ in build.segments)
        index_files: dict[str, str] = {}
        rows = 0
        if n_docs:
            arrays, keep, rows = _index_arrays(build, previous.loaded, vocab)
            terms = [""] * len(vocab)
            for term, i in vocab.items():
                terms[i] = term
            index_files = storage.save_index(self.folder, arrays, terms, keep)
        else:
            shutil.rmtree(self.folder / storage.INDEX_DIR, ignore_errors=True)
        manifest = {
            "name": self.name,
            "root": str(root),
            "sources": sources,
            "tokenizer": TOKENIZER_VERSION,
            "created_at": (old or {}).get("created_at", now),
            "updated_at": now,
            "chunks": n_docs,
            "rows": rows,
            "store": store,
            "store_size": writer.size,
            "blocks": writer.blocks,
            "index_files": index_files,
            # Files this write did not touch, checked by this run and settled (the base
            # segment, an unchanged store): the next open need not hash them.
            "stamps": {},
            "files": build.entries,
        }
        if previous.loaded is not None:
            manifest["stamps"] = storage.settled_stamps(self.folder, manifest)
        storage.write_manifest(self.folder, manifest)
        previous_store = (previous.loaded.manifest.get("store") if previous.loaded else None) or ""
        storage.remove_old_stores(self.folder, {store, previous_store})
        self._cache = None

    # --- reading --------------------------------------------------------------------------------

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """The ``k`` best chunks for ``query``, best first; chunks scoring 0 are left out."""
        try:
            return self._search(query, k)
        except storage.CorruptIndex as exc:
            # A chunk range failed its checksum as it was read: rebuild from the sources.
            self._cache = None
            self.last_report = self._refresh(rebuild=str(exc))
            return self._search(query, k)

    def _search(self, query: str, k: int) -> list[Hit]:
        loaded = self._loaded()
        if loaded.index is None or k <= 0:
            return []
        vocab = loaded.index.vocab
        ids = [vocab[term] for term in tokenize(query) if term in vocab]
        if not ids:
            return []
        import numpy as np

        scores = loaded.index.scores(ids)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        root = str(loaded.manifest["root"])
        return [Hit(loaded.chunk(int(i)), float(scores[i]), root) for i in top if scores[i] > 0]

    def _loaded(self) -> storage.Loaded:
        """The verified index, from memory while manifest.json is unchanged on disk."""
        stamp = self._stamp()
        if self._cache is not None and self._cache[0] == stamp:
            return self._cache[1]
        try:
            loaded = storage.load_verified(self.folder, TOKENIZER_VERSION, for_search=True)
        except storage.CorruptIndex as exc:
            if not self.folder.exists():
                raise self._unusable(None) from exc
            self.last_report = self.refresh()  # raises KnowledgeIndexError if it cannot
            loaded = storage.load_verified(self.folder, TOKENIZER_VERSION, for_search=True)
        self._cache = (self._stamp(), loaded)
        return loaded

    def _stamp(self) -> tuple[int, int, int]:
        return _stamp(self.folder / storage.MANIFEST)

    def verify(self) -> str | None:
        """None when the index on disk is sound, else what is wrong with it (nothing is fixed).

        The full check: every index file and every chunk range against its checksum.
        """
        try:
            storage.verify_all(self.folder, TOKENIZER_VERSION)
        except storage.CorruptIndex as exc:
            return str(exc)
        return None

    def info(self) -> dict[str, Any]:
        """``name, root, sources, files, chunks, updated_at`` from the manifest (not verified).

        Kept per manifest stamp: a turn start asks for every knowledge base's info, and a big
        manifest costs milliseconds to parse.
        """
        stamp = self._stamp()
        cached = _INFO_CACHE.get(self.folder)
        if cached is not None and cached[0] == stamp and stamp != (0, 0, 0):
            return dict(cached[1])
        try:
            manifest = storage.read_manifest(self.folder)
        except storage.CorruptIndex as exc:
            if not self.folder.exists():
                raise self._unusable(None) from exc
            return {
                "name": self.name,
                "root": None,
                "sources": [],
                "files": 0,
                "chunks": 0,
                "updated_at": None,
                "problem": str(exc),
            }
        info = {
            "name": self.name,
            "root": manifest["root"],
            "sources": list(manifest["sources"]),
            "files": len(manifest["files"]),
            "chunks": manifest["chunks"],
            "updated_at": manifest.get("updated_at"),
        }
        _INFO_CACHE[self.folder] = (stamp, info)
        return dict(info)


_INFO_CACHE: dict[Path, tuple[tuple[int, int, int], dict[str, Any]]] = {}


def _stamp(path: Path) -> tuple[int, int, int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        return (0, 0, 0)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class _StoreWriter:
    """Appends chunk lines to the chunk store: the current one, or a new generation when there
    is none to trust or when less than half of it would still be live."""

    def __init__(self, folder: Path, manifest: dict[str, Any] | None) -> None:
        self.folder = folder
        self.old_name: str | None = manifest.get("store") if manifest else None
        self.name = self.old_name or storage.new_store_name()
        self.size = 0
        self._fh: Any = None
        # [start, end, checksum] of each batch of appends: a refresh checks the store with a
        # few hashes instead of one per file.
        self.blocks: list[list[Any]] = list(manifest.get("blocks") or []) if manifest else []
        self._block: tuple[int, Any] | None = None
        if self.old_name:
            try:
                self.size = (folder / self.old_name).stat().st_size
            except OSError:
                self.old_name, self.name = None, storage.new_store_name()

    def _open(self) -> Any:
        if self._fh is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            storage.remove_leftovers(self.folder)
            self._fh = (self.folder / self.name).open("ab")
            self.size = self._fh.seek(0, os.SEEK_END)
            self._block = (self.size, storage.new_checksum())
        return self._fh

    def keep(self, entry: dict[str, Any]) -> dict[str, Any]:
        """A reused file's range, unchanged (it stays in the same store)."""
        return {k: entry[k] for k in ("offset", "length", "digest")}

    def append(self, data: bytes) -> dict[str, Any]:
        fh = self._open()
        offset = self.size
        fh.write(data)
        self.size += len(data)
        assert self._block is not None
        self._block[1].update(data)
        return {"offset": offset, "length": len(data), "digest": storage.checksum(data)}

    def finish(self, entries: dict[str, Any]) -> str:
        """Flush and fsync; compact into a new generation when the store is mostly dead."""
        fh = self._open()
        fh.flush()
        os.fsync(fh.fileno())
        if self._block is not None and self.size > self._block[0]:
            self.blocks.append([self._block[0], self.size, self._block[1].hexdigest()])
            self._block = None
        live = sum(int(e["length"]) for e in entries.values())
        if self.size > 2 * live + (1 << 16):
            self._compact(entries)
        return self.name

    def _compact(self, entries: dict[str, Any]) -> None:
        fresh = storage.new_store_name()
        offset = 0
        digest = storage.new_checksum()
        with (self.folder / self.name).open("rb") as src, (self.folder / fresh).open("wb") as dst:
            for entry in entries.values():
                src.seek(int(entry["offset"]))
                data = src.read(int(entry["length"]))
                dst.write(data)
                digest.update(data)
                entry["offset"] = offset
                offset += int(entry["length"])
            dst.flush()
            os.fsync(dst.fileno())
        self.close()
        self.name, self.size = fresh, offset
        self.blocks = [[0, offset, digest.hexdigest()]]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class _Ticker:
    """Progress inside one file: ``tick(bytes read so far)``."""

    __slots__ = ("done", "progress", "rel", "total")

    def __init__(self, progress: Progress | None, done: int, total: int, rel: str) -> None:
        self.progress, self.done, self.total, self.rel = progress, done, total, rel

    def __call__(self, read: int) -> None:
        if self.progress:
            self.progress(self.done + read, self.total, self.rel)


def _new_docs(build: _Build, vocab: Vocabulary) -> tuple[Any, Any, Any]:
    """(ptr, terms, tfs) of the new docs, counted from their token ids in one numpy pass."""
    import numpy as np

    n_new = len(build.doc_lengths)
    ids = np.frombuffer(build.ids, dtype=np.int32) if len(build.ids) else np.zeros(0, np.int32)
    per_doc = np.frombuffer(build.doc_lengths, np.int64) if n_new else np.zeros(0, np.int64)
    docs = np.repeat(np.arange(n_new, dtype=np.int64), per_doc)
    keep = ids >= vocab.n_stop
    keys = (docs[keep] << 32) | ids[keep].astype(np.int64)
    unique, counts = np.unique(keys, return_counts=True)
    ptr = np.zeros(n_new + 1, dtype=np.int64)
    np.cumsum(np.bincount((unique >> 32).astype(np.int64), minlength=n_new), out=ptr[1:])
    return ptr, (unique & 0xFFFFFFFF).astype(np.int32), counts.astype(np.int32)


def _gather(
    parts: list[tuple[tuple[Any, Any, Any], int, int]],
) -> tuple[Any, Any, Any]:
    """Doc-major arrays made of row slices ``(arrays, first, rows)`` of other doc-major arrays."""
    import numpy as np

    per_doc, terms, tfs = [np.zeros(0, np.int64)], [np.zeros(0, np.int32)], [np.zeros(0, np.int32)]
    for (ptr, t, f), first, rows in parts:
        lo, hi = int(ptr[first]), int(ptr[first + rows])
        per_doc.append(np.diff(ptr[first : first + rows + 1]))
        terms.append(t[lo:hi])
        tfs.append(f[lo:hi])
    counts = np.concatenate(per_doc)
    ptr_all = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr_all[1:])
    return ptr_all, np.concatenate(terms).astype(np.int32), np.concatenate(tfs).astype(np.int32)


def _index_arrays(
    build: _Build, loaded: storage.Loaded | None, vocab: Vocabulary
) -> tuple[dict[str, Any], dict[str, str], int]:
    """(arrays to write, base files to carry over with their checksums, row count).

    Sets each entry's ``row``. The base is kept when what changed since it was built (its dead
    rows plus the delta) stays under ``REBUILD_SHARE`` of it; otherwise every live row goes
    into a new base, in the files' order.
    """
    import numpy as np

    from deeptutor_jupyter.knowledge import bm25

    new = _new_docs(build, vocab)
    index = loaded.index if loaded else None
    first_delta = index.delta_first if index is not None else 0
    empty = (np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))
    base_doc: tuple[Any, ...] = empty
    delta_doc: tuple[Any, ...] = empty
    if loaded is not None and index is not None:
        base_doc = tuple(storage.load_arrays(loaded.folder, BASE_DOC))
        delta_doc = tuple(storage.load_arrays(loaded.folder, bm25.DELTA_FILES))

    def source(kind: str, first: int) -> tuple[tuple[Any, ...], int]:
        if kind == "new":
            return new, first
        if first < first_delta:
            return base_doc, first
        return delta_doc, first - first_delta

    # Slices never run across the base's end into the delta: they come from other arrays.
    segments = _coalesce([(k, f, n) for k, f, n, _ in build.segments], first_delta)
    dead = np.ones(first_delta, dtype=bool)
    moved = 0
    for kind, first, rows, _ in build.segments:
        if kind == "old" and first < first_delta:
            dead[first : first + rows] = False
        else:
            moved += rows
    n_vocab = len(vocab)
    if index is None or int(dead.sum()) + moved > bm25.REBUILD_SHARE * first_delta:
        row = 0
        for _, _, rows, rel in build.segments:
            build.entries[rel]["row"] = row
            row += rows
        ptr, terms, tfs = _gather([(*source(k, f), n) for k, f, n in segments])
        indptr, rows_by_term, tfs_by_term = bm25.postings(ptr, terms, tfs, n_vocab)
        df = np.bincount(terms, minlength=n_vocab).astype(np.int32)
        arrays = {
            "base_indptr.npy": indptr,
            "base_rows.npy": rows_by_term,
            "base_tfs.npy": tfs_by_term,
            "base_doc_ptr.npy": ptr,
            "base_doc_terms.npy": terms,
            "base_doc_tfs.npy": tfs,
            "base_df.npy": df,
            **dict(zip(bm25.DELTA_FILES, empty, strict=True)),
            "dead.npy": np.zeros(row, dtype=bool),
            "dl.npy": bm25.lengths(ptr, tfs),
            "df.npy": df,
        }
        return arrays, {}, row
    # Keep the base: only the delta, the dead mask and the statistics are written.
    delta_parts = []
    row = first_delta
    for kind, first, rows, rel in build.segments:
        if kind == "old" and first < first_delta:
            continue  # stays where it is in the base
        build.entries[rel]["row"] = row
        row += rows
        delta_parts.append((*source(kind, first), rows))
    d_ptr, d_terms, d_tfs = _gather(delta_parts)
    base_ptr, base_terms = base_doc[0], base_doc[1]
    dead_terms = [
        np.asarray(base_terms[int(base_ptr[a]) : int(base_ptr[b])]) for a, b in _runs(dead)
    ]
    assert loaded is not None and index is not None
    base_df = storage.load_arrays(loaded.folder, ("base_df.npy",))[0]
    df = np.zeros(n_vocab, dtype=np.int64)
    df[: len(base_df)] += base_df
    if dead_terms:
        df -= np.bincount(np.concatenate(dead_terms), minlength=n_vocab)
    df += np.bincount(d_terms, minlength=n_vocab)
    dl = np.concatenate([np.asarray(index.dl[:first_delta]), bm25.lengths(d_ptr, d_tfs)])
    dl[:first_delta][dead] = 0
    arrays = {
        "delta_doc_ptr.npy": d_ptr,
        "delta_doc_terms.npy": d_terms,
        "delta_doc_tfs.npy": d_tfs,
        "dead.npy": dead,
        "dl.npy": dl.astype(np.int32),
        "df.npy": df.astype(np.int32),
    }
    keep = {name: loaded.manifest["index_files"][name] for name in bm25.BASE_FILES}
    return arrays, keep, row


def _runs(mask: Any) -> list[tuple[int, int]]:
    """(start, end) of each run of True in a boolean array."""
    import numpy as np

    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def _coalesce(segments: list[tuple[str, int, int]], boundary: int) -> list[tuple[str, int, int]]:
    """Adjacent segments of the same kind whose rows follow each other become one slice, as
    long as both lie on the same side of ``boundary`` (the first delta row)."""
    out: list[tuple[str, int, int]] = []
    for kind, first, rows in segments:
        if out:
            last_kind, last_first, last_rows = out[-1]
            same_side = kind == "new" or (last_first < boundary) == (first < boundary)
            if last_kind == kind and last_first + last_rows == first and same_side:
                out[-1] = (kind, last_first, last_rows + rows)
                continue
        out.append((kind, first, rows))
    return out


def _old_manifest(folder: Path) -> dict[str, Any] | None:
    """Sources and root of a manifest written by an older version, to re-read its files."""
    import json

    try:
        data = json.loads((folder / storage.MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        isinstance(data, dict)
        and isinstance(data.get("sources"), list)
        and isinstance(data.get("root"), str)
    ):
        return {**data, "files": data.get("files") if isinstance(data.get("files"), dict) else {}}
    return None


def _merge(old: list[str], new: list[str]) -> list[str]:
    return list(dict.fromkeys([*old, *new]))


def _discover(sources: list[str], errors: list[str]) -> list[tuple[str, os.stat_result]]:
    """Every supported file under the sources with its stat, once each, in a stable order.

    A symlink inside a source folder that resolves outside it is skipped and named: adding a
    folder must not make a private file elsewhere searchable (symlinked folders are not
    descended at all). A file named directly is indexed even when it is a link. The walk uses
    ``os.scandir``, whose entries carry what pathlib would ask the file system for again.
    """
    found: dict[str, os.stat_result] = {}
    outside: list[str] = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            top = str(path.resolve())
            _walk(top, top, found, outside)
        elif path.is_file():
            if path.suffix.lower() in SUPPORTED_SUFFIXES:
                resolved = path.resolve()
                found.setdefault(str(resolved), resolved.stat())
            else:
                errors.append(
                    f"{source}: unsupported file type (supported: "
                    f"{', '.join(sorted(SUPPORTED_SUFFIXES))})"
                )
        else:
            errors.append(f"{source}: not found")
    errors += [f"{p}: skipped, a link to a file outside the folder being added" for p in outside]
    sized: list[tuple[str, os.stat_result]] = []
    for name, st in found.items():
        if st.st_size > MAX_FILE_BYTES:
            errors.append(f"{name}: skipped, larger than {MAX_FILE_BYTES // 2**20} MB")
        else:
            sized.append((name, st))
    return sized


def _walk(folder: str, top: str, found: dict[str, os.stat_result], outside: list[str]) -> None:
    # Depth first with names sorted: the same order as sorted(Path(top).rglob("*")).
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        name = entry.name
        if name.startswith(".") or name in _SKIPPED_DIRS:
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                _walk(entry.path, top, found, outside)
                continue
            dot = name.rfind(".")  # names starting with "." were skipped above
            if dot < 0 or name[dot:].lower() not in SUPPORTED_SUFFIXES:
                continue
            if entry.is_symlink():
                target = os.path.realpath(entry.path)
                if not os.path.isfile(target):
                    continue
                if os.path.commonpath([target, top]) != top:
                    outside.append(entry.path)
                    continue
                found.setdefault(target, os.stat(target))
            elif entry.is_file(follow_symlinks=False):
                found.setdefault(entry.path, entry.stat(follow_symlinks=False))
        except OSError:
            continue  # vanished while walking


def list_kbs(home: Path) -> list[dict[str, Any]]:
    """``info()`` of every knowledge base under ``home/kb``, by name; damaged ones included.

    One ``stat`` per knowledge base when nothing changed: manifests are parsed again only
    when their stamp moves (``KnowledgeBase.info``).
    """
    base = Path(home).expanduser() / "kb"
    if not base.is_dir():
        return []
    out = []
    for folder in sorted(base.iterdir()):
        try:
            kb = KnowledgeBase(home, folder.name)
        except ValueError:
            continue  # not one of ours (a trash folder being deleted, a stray file)
        if folder.is_dir():
            out.append(kb.info())
    return out


def remove_kb(home: Path, name: str) -> None:
    """Delete a knowledge base; KnowledgeBaseNotFound when there is none of that name."""
    kb = KnowledgeBase(home, name)
    if not kb.folder.is_dir():
        raise KnowledgeBaseNotFound(f"No knowledge base named {name!r}")
    # Renamed first so that a half-deleted folder is never listed or searched.
    trash = kb.folder.with_name(f".removing-{name}-{uuid.uuid4().hex}")
    os.replace(kb.folder, trash)
    shutil.rmtree(trash, ignore_errors=True)
