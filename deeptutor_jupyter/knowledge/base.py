"""A named knowledge base: remembered sources, an incremental BM25 index, and search.

A refresh costs what changed, not what is kept (layout in ``knowledge/storage.py``):

* each file's size and ``mtime_ns`` are in the manifest; a file whose stamp is unchanged is not
  read at all, and one whose stamp moved is hashed and re-read only if its SHA-256 changed;
* the chunks of unchanged files stay where they are in the append-only chunk store;
* each chunk's term ids and counts are kept, so only changed files are tokenised, and the index
  keeps term counts in a base and a delta segment (``knowledge/bm25.py``): a refresh writes the
  delta and the statistics, and rebuilds the base only once changes pass a tenth of it.

A row's score does not depend on the segment that holds it, so a refresh gives the same search
results as a full rebuild of the same files.
"""

from __future__ import annotations

import bisect
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deeptutor_jupyter._files import move
from deeptutor_jupyter.knowledge import bm25, shards, storage
from deeptutor_jupyter.knowledge.chunkstore import StoreWriter
from deeptutor_jupyter.knowledge.discover import MAX_FILE_BYTES, discover, discover_paths
from deeptutor_jupyter.knowledge.filetable import FileTable
from deeptutor_jupyter.knowledge.ingest import IngestError, ingest_file, relative_path
from deeptutor_jupyter.knowledge.model import (
    Hit,
    IndexReport,
    KnowledgeBaseNotFound,
    KnowledgeIndexError,
    validate_kb_name,
)
from deeptutor_jupyter.knowledge.rebuild import Build, index_arrays
from deeptutor_jupyter.knowledge.tokenize import (
    TOKENIZER_VERSION,
    Vocabulary,
    append_token_ids,
    tokenize,
)

__all__ = ["KnowledgeBase", "Progress", "remove_kb"]

# progress(done, total, current_file): done and total are bytes of the files being indexed.
Progress = Callable[[int, int, str], None]

_PROGRESS_STEP = 1 << 20  # inside a big file, report every MiB tokenised


@dataclass
class _Previous:
    """What a re-index may reuse: the verified index, or nothing (``damage`` says why)."""

    manifest: dict[str, Any] | None = None
    loaded: storage.Loaded | None = None
    damage: str | None = None


@dataclass
class _Part:
    """The part of the file table a refresh reads: the pieces holding what it looks at
    (``keys``), their rows it looks at (``table``) and their other rows (``rest``); the pieces
    it did not read are read only if every file's row or range moves (``others``)."""

    folder: Path
    manifest: dict[str, Any] | None  # the previous, verified manifest
    keys: set[str] = field(default_factory=set)
    table: FileTable = field(default_factory=FileTable)
    rest: list[FileTable] = field(default_factory=list)
    whole: set[str] | None = None  # folders all of whose pieces were read; None: all
    pieces: dict[str, FileTable] = field(default_factory=dict)
    # A full pass: the first row of each piece in ``table`` (pieces in key order).
    starts: list[tuple[int, str]] = field(default_factory=list)
    _others: list[FileTable] | None = None

    @classmethod
    def read(
        cls, folder: Path, loaded: storage.Loaded | None, scope: list[str] | None, rels: list[str]
    ) -> _Part:
        """The pieces holding ``rels`` (files found) and anything under ``scope`` (the paths
        looked at; None: everything), their ranges checked."""
        if loaded is None:
            return cls(folder, None)
        manifest = loaded.manifest
        every, buckets = manifest["shards"], manifest["buckets"]
        whole: set[str] | None = None
        if scope is None:
            keys = set(every)
        else:
            keys = {k for rel in (*scope, *rels) if (k := shards.shard_key(rel, buckets)) in every}
            for rel in scope:
                keys.update(shards.keys_under(every, rel))
            missing = {shards.key_folder(k) for k in every if k not in keys}
            whole = {shards.key_folder(k) for k in keys} - missing
        pieces = storage.read_tables(folder, manifest, sorted(keys))
        table = storage.concat(list(pieces.values())) if pieces else FileTable()
        storage.check_ranges(folder, manifest, table, whole=scope is None)
        part = cls(folder, manifest, keys, table, [], whole, pieces)
        if scope is None:
            at = 0
            for key, piece in pieces.items():
                part.starts.append((at, key))
                at += len(piece)
        else:
            inside = [
                any(not s or rel == s or rel.startswith(s + "/") for s in scope)
                for rel in table.path
            ]
            part.table = table.take([i for i, yes in enumerate(inside) if yes])
            part.rest = [table.take([i for i, yes in enumerate(inside) if not yes])]
        return part

    def others(self) -> list[FileTable]:
        """The pieces this refresh did not read (once, when every file's row moves)."""
        if self._others is None:
            keys = sorted(set(self.manifest["shards"]) - self.keys) if self.manifest else []
            read = storage.read_tables(self.folder, self.manifest or {}, keys) if keys else {}
            self._others = list(read.values())
        return self._others

    def written(
        self,
        folder: Path,
        manifest: dict[str, Any],
        tables: list[FileTable],
        *,
        every: bool = False,
        build: Build | None = None,
    ) -> dict[str, Any]:
        """Write the pieces that changed: ``tables`` (the rows looked at, as they are now) with
        the rest of their pieces, or with every piece when ``every``. The manifest's keys that
        say which pieces hold the file table now.

        A full pass in which no file came or went rewrites the pieces of the files read anew
        from their pieces as read, without regrouping every row."""
        before = self.manifest["shards"] if self.manifest else {}
        buckets = dict(self.manifest["buckets"]) if self.manifest else {}
        if every:
            grouped = shards.regroup([*tables, *self.rest, *self.others()], buckets)
            replaced = set(before)
        elif build is not None and self.starts and _same_files(build, len(self.table)):
            # Each file read anew replaces its own row in its own piece: the other pieces,
            # and the other rows of its piece, are as they were.
            firsts = [at for at, _ in self.starts]
            grouped = {}
            for i in build.fresh:
                at = build.order[i]
                first, key = self.starts[bisect.bisect_right(firsts, at) - 1]
                if key not in grouped:
                    grouped[key] = self.pieces[key].copy()
                grouped[key].set(at - first, build.table.entry(i))
            replaced = set(grouped)
        else:
            grouped = shards.regroup([*tables, *self.rest], buckets, self.whole)
            replaced = self.keys
        # A piece whose rows are all as they were keeps its file.
        changed = {
            k: t
            for k, t in grouped.items()
            if k not in self.pieces or t.to_json() != self.pieces[k].to_json()
        }
        kept = {k: v for k, v in before.items() if k not in replaced or k in grouped}
        merged = {**kept, **shards.write_pieces(folder, changed, storage.checksum)}
        merged = {k: v for k, v in merged.items() if k in grouped or k not in replaced}
        return {
            "shards": dict(sorted(merged.items())),
            "buckets": buckets,
            "n_files": sum(int(v[2]) for v in merged.values()),
        }

    def remove_old(self, folder: Path, manifest: dict[str, Any]) -> None:
        """Delete piece files named by neither ``manifest`` nor the previous one."""
        keep = {v[0] for v in manifest["shards"].values()}
        keep |= {v[0] for v in (self.manifest or {}).get("shards", {}).values()}
        storage.remove_old_pieces(folder, keep)


def _same_files(build: Build, before: int) -> bool:
    """No file came or went: the new table is the old one's rows, some read anew."""
    return len(build.order) == before and all(build.order[i] >= 0 for i in build.fresh)


def _had_files(manifest: dict[str, Any]) -> bool:
    """The manifest (of this version or an older one) lists at least one file."""
    return bool(manifest.get("n_files") or manifest.get("files"))


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
            report = _report_for(previous.damage)
            if previous.damage and old is None:
                report.errors.append(
                    f"the previous index was unreadable ({previous.damage}); "
                    "its sources are forgotten"
                )
            sources = _merge(old["sources"] if old else [], [str(p.resolve()) for p in new])
            root = Path(old["root"]) if old else (self._new_root or Path.cwd()).resolve()
            return self._reindex_or_rebuild(previous, sources, root, report, progress)

    def refresh(
        self, progress: Progress | None = None, *, paths: list[Path] | None = None
    ) -> IndexReport:
        """Bring the index up to date with the sources: new, changed and deleted files.

        Without ``paths`` every file of the sources is stat-ed (a change of content does not
        move its folder's mtime, so nothing less finds every change). ``paths``, files or
        folders known to have changed (a save, a watcher, ``%tutor kb refresh NAME PATH``):
        only they are looked at, and only the pieces of the file table that hold them are read
        and rewritten, so the cost follows what changed, not the size of the knowledge base.
        """
        return self._refresh(progress, paths=paths)

    def _refresh(
        self,
        progress: Progress | None = None,
        *,
        rebuild: str = "",
        paths: list[Path] | None = None,
    ) -> IndexReport:
        with storage.write_lock(self.folder):
            previous = self._previous_state()
            if rebuild and previous.damage is None:
                previous = _Previous(previous.manifest, None, rebuild)
            old = previous.manifest
            if old is None:
                raise self._unusable(previous.damage)
            report = _report_for(previous.damage)
            looked = None if paths is None else [str(Path(p).expanduser().resolve()) for p in paths]
            return self._reindex_or_rebuild(
                previous, old["sources"], Path(old["root"]), report, progress, looked
            )

    def _files_on_disk(self) -> list[str]:
        try:
            return [name for name in os.listdir(self.folder) if name != ".lock"]
        except FileNotFoundError:
            return []

    def _reindex_or_rebuild(
        self,
        previous: _Previous,
        sources: list[str],
        root: Path,
        report: IndexReport,
        progress: Progress | None,
        paths: list[str] | None = None,
    ) -> IndexReport:
        errors = list(report.errors)
        try:
            return self._reindex(previous, sources, root, report, progress, paths)
        except storage.CorruptIndex as exc:
            if previous.loaded is None:
                raise
            damage = str(exc)
        # An index array read only now (a refresh opens them only when a file changed) did not
        # agree with the manifest: nothing of it is trusted, every file is read again.
        previous = _Previous(previous.manifest, None, damage)
        report = _report_for(damage)
        report.errors = errors
        return self._reindex(previous, sources, root, report, progress)

    def _previous_state(self) -> _Previous:
        if not self._files_on_disk():
            return _Previous()
        try:
            # Checked, not opened: a refresh with nothing changed reads no index array, and
            # only the pieces of the file table it looks at (their ranges are checked then).
            loaded = storage.load_verified(
                self.folder, TOKENIZER_VERSION, open_index=False, tables=False
            )
        except storage.CorruptIndex as exc:
            try:
                manifest: dict[str, Any] | None = storage.read_manifest(self.folder)
            except storage.CorruptIndex as again:
                older = str(again) == storage.OLDER_VERSION
                manifest = _old_manifest(self.folder) if older else None
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
        paths: list[str] | None = None,
    ) -> IndexReport:
        old = previous.manifest
        loaded = previous.loaded
        prefix = str(root).rstrip("/") + "/"
        cut = len(prefix)

        def rel_of(name: str) -> str:
            # Plain strings until a file has to be opened: 50,000 Path objects cost more than
            # the stat calls of a refresh with nothing changed.
            if name.startswith(prefix):
                return name[cut:]
            return "" if name == str(root) else relative_path(Path(name), root)

        if paths is not None and loaded is not None:
            files, looked = discover_paths(sources, paths, report.errors)
            scope: list[str] | None = [rel_of(p) for p in looked]
        else:
            files, scope = discover(sources, report.errors), None
        if report.rebuilt_from_corruption and old and _had_files(old) and not files:
            raise KnowledgeIndexError(
                f"The index of {self.name!r} is damaged and cannot be rebuilt: none of its "
                f"sources exist any more ({', '.join(sources)}). Remove it with "
                f"%tutor kb remove {self.name}"
            )
        part = _Part.read(self.folder, loaded, scope, [rel_of(n) for n in files])
        old_table = part.table
        writer = StoreWriter(self.folder, loaded.manifest if loaded else None)
        vocab = _LazyVocabulary(self.folder, loaded.manifest if loaded else None)
        build = Build()
        total = sum(st.st_size for st in files.values()) if progress else 0  # progress only
        done = 0
        if progress:
            progress(0, total, "")
        where, sizes, mtimes = old_table.rows_by_path().get, old_table.size, old_table.mtime_ns
        order, fresh = build.order, build.fresh
        try:
            for name, st in files.items():
                rel = rel_of(name)
                at = where(rel)
                if at is not None and mtimes[at] == st.st_mtime_ns and sizes[at] == st.st_size:
                    order.append(at)  # the common case, inline: same stamp, row and chunks
                else:
                    tick = (progress, done, total)  # progress inside a big file: see below
                    entry = self._index_file(
                        name, st, rel, root, at, old_table, build, writer, vocab, report, tick
                    )
                    if entry is not None:
                        fresh[len(order)] = entry
                        order.append(-1 if at is None else at)
                if progress:
                    done += st.st_size
                    progress(done, total, rel)
            build.settle(old_table)
            report.removed = len(old_table) - (len(order) - report.added)
            before = int(loaded.manifest["n_files"]) if loaded else 0
            files_after = before - len(old_table) + len(order)
            report.unchanged = files_after - report.added - report.updated
            old_chunks = int(loaded.manifest["chunks"]) if loaded else 0
            report.chunks = build.chunks(old_chunks)
            if report.changed or old is None or old.get("sources") != sources:
                self._write(old, previous, sources, root, build, writer, vocab, part)
            elif loaded is not None:
                self._remember_stamps(loaded.manifest, build, part)
        finally:
            writer.close()
            vocab.release()
        return report

    def _index_file(
        self,
        path: str,
        st: os.stat_result,
        rel: str,
        root: Path,
        at: int | None,
        old_table: FileTable,
        build: Build,
        writer: StoreWriter,
        vocab: _LazyVocabulary,
        report: IndexReport,
        tick: tuple[Progress | None, int, int],
    ) -> dict[str, Any] | None:
        """A file whose stamp moved or that is new (``at``: its row in the previous table):
        hashed, and chunked if its hash changed. Its new entry, or None when it cannot be
        read or parsed (said in ``report.errors``)."""
        stamp = {"path": rel, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        try:
            data, digest = storage.read_source(path, expect=st, limit=MAX_FILE_BYTES)
        except OSError as exc:
            report.errors.append(f"{rel}: cannot be read ({exc.strerror or exc})")
            return None
        if at is not None and old_table.sha256[at] == digest:
            # Touched but identical: same rows, same range, a new stamp to record.
            build.stamps_moved = True
            return {**old_table.entry(at), **stamp}
        try:
            found = ingest_file(path, root, self.name, data=data, rel=rel, lazy=True)
        except IngestError as exc:
            report.errors.append(str(exc))
            return None
        if at is not None:
            report.updated += 1
            build.replaced.append(at)
        else:
            report.added += 1
        first_doc = build.new_docs
        lines: list[bytes] = []
        read, next_tick = 0, _PROGRESS_STEP
        report_progress, done, total = tick
        terms = vocab.get()
        # Read, tokenised and stored a batch at a time (a file's chunks, or a MiB of a big
        # file's): memory stays bounded, each batch is still in cache at every step, and
        # progress moves inside a big file.
        batch: list[str] = []
        batched = n_chunks = 0
        writer.begin()
        for chunk in found:
            text = f"{chunk.title}\n{chunk.text}"
            batch.append(text)
            batched += len(text)
            lines.append(storage.chunk_line(chunk))
            n_chunks += 1
            read += len(chunk.text)  # characters: never more than the file's bytes
            if batched >= _PROGRESS_STEP:
                build.tokenised(append_token_ids(build.ids, batch, terms), terms)
                writer.write(b"".join(lines))
                batch, lines, batched = [], [], 0
            if read >= next_tick and report_progress:
                report_progress(done + read, total, rel)
                next_tick = read + _PROGRESS_STEP
        if batch:
            build.tokenised(append_token_ids(build.ids, batch, terms), terms)
            writer.write(b"".join(lines))
        build.new[len(build.order)] = (first_doc, n_chunks)
        return {"sha256": digest, **stamp, "chunks": n_chunks, "row": 0} | writer.end()

    def _remember_stamps(self, manifest: dict[str, Any], build: Build, part: _Part) -> None:
        """Nothing changed: record touched-but-identical files' new stamps, and the stamps of
        index files and store just verified, so the next open need not hash them again."""
        settled = storage.settled_stamps(self.folder, manifest)
        if not build.stamps_moved and settled == manifest.get("stamps", {}):
            return  # nothing to record: leave the manifest alone
        manifest = {**manifest, "stamps": settled}
        if build.stamps_moved:
            manifest.update(part.written(self.folder, manifest, [build.table], build=build))
        storage.write_manifest(self.folder, manifest, sources_changed=False)
        part.remove_old(self.folder, manifest)

    def _write(
        self,
        old: dict[str, Any] | None,
        previous: _Previous,
        sources: list[str],
        root: Path,
        build: Build,
        writer: StoreWriter,
        lazy_vocab: _LazyVocabulary,
        part: _Part,
    ) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        store = writer.finish()
        before = previous.loaded.manifest if previous.loaded else None
        live = (int(before["store_live"]) if before else 0) - build.dropped_bytes
        live += writer.appended
        n_docs = build.chunks(int(before["chunks"]) if before else 0)
        index_files: dict[str, str] = {}
        rows = 0
        every_file = False  # every file's row or range moved: every piece is rewritten
        if n_docs:
            vocab = lazy_vocab.get()
            arrays, keep, rows, rebuilt = index_arrays(
                build, previous.loaded, vocab, lambda: [*part.rest, *part.others()]
            )
            every_file = rebuilt is not None
            # A vocabulary that did not grow is carried over like the base, not rewritten.
            kept_vocab = lazy_vocab.unchanged_file()
            if kept_vocab is not None:
                keep[kept_vocab[0]] = kept_vocab[1]
            terms = None if kept_vocab is not None else vocab.terms()
            index_files = storage.save_index(self.folder, arrays, terms, keep)
            lazy_vocab.written(index_files)
        else:
            shutil.rmtree(self.folder / storage.INDEX_DIR, ignore_errors=True)
        if writer.mostly_dead(live):
            writer.compact([build.table, *part.rest, *part.others()])
            store, live, every_file = writer.name, writer.size, True
        manifest: dict[str, Any] = {
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
            "store_live": live,
            "blocks": writer.blocks,
            "index_files": index_files,
            # Files this write did not touch, checked by this run and settled (the base
            # segment, an unchanged store): the next open need not hash them.
            "stamps": {},
            "shards": {},
            "buckets": {},
        }
        manifest.update(
            part.written(self.folder, manifest, [build.table], every=every_file, build=build)
        )
        if previous.loaded is not None:
            manifest["stamps"] = storage.settled_stamps(self.folder, manifest)
        same = old is not None and (old.get("sources"), old.get("root")) == (sources, str(root))
        storage.write_manifest(self.folder, manifest, sources_changed=not same)
        previous_store = (before.get("store") if before else None) or ""
        storage.remove_old_stores(self.folder, {store, previous_store})
        old_files = before.get("index_files") if before else None
        storage.remove_old_index_files(self.folder, {*index_files, *(old_files or {})})
        part.remove_old(self.folder, manifest)
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
            "files": manifest["n_files"],
            "chunks": manifest["chunks"],
            "updated_at": manifest.get("updated_at"),
        }
        _INFO_CACHE[self.folder] = (stamp, info)
        return dict(info)


_INFO_CACHE: dict[Path, tuple[tuple[int, int, int], dict[str, Any]]] = {}


class _LazyVocabulary:
    """The index's vocabulary, read from its file only once a file has to be tokenised.

    The last one written or read for each knowledge base is kept in the process, keyed by
    its file's name and checksum (the name carries the write's generation), so a kernel that
    refreshes again uses it instead of building one from the file: at 50,000 files that is
    ~10 ms of a refresh. It is used in place, not copied (a copy, and freeing the one it
    replaces, cost as much again): a refresh that does not write it takes back the terms it
    added (``release``), so the kept one is always the one on disk.
    """

    def __init__(self, folder: Path, manifest: dict[str, Any] | None) -> None:
        self.folder = folder
        # None: a new index (or one with no chunks), the vocabulary starts empty
        self.manifest = manifest if manifest and manifest["chunks"] else None
        self._vocab: Vocabulary | None = None
        self._read = 0  # terms in the file

    def _key(self) -> tuple[str, str] | None:
        if self.manifest is None:
            return None
        file = storage.index_names(self.manifest).get(bm25.VOCAB, "")
        return file, str(self.manifest["index_files"].get(file))

    def get(self) -> Vocabulary:
        if self._vocab is None:
            key = self._key()
            kept = _VOCABULARIES.get(self.folder)
            if key is None:
                self._vocab = Vocabulary()
            elif kept is not None and kept[0] == key:
                self._vocab = kept[1]
            else:
                self._vocab = Vocabulary(storage.load_vocab(self.folder, self.manifest or {}))
            self._read = len(self._vocab) if key is not None else -1
        return self._vocab

    def unchanged_file(self) -> tuple[str, str] | None:
        """(file, checksum) of the vocabulary file when no term was added since it was read."""
        key = self._key()
        if key is None or self._vocab is None or len(self._vocab) != self._read:
            return None
        return key

    def written(self, index_files: dict[str, str]) -> None:
        """Keep the vocabulary just written (or carried over) for the next refresh."""
        if self._vocab is None:
            return
        file = storage.index_names({"index_files": index_files}).get(bm25.VOCAB)
        if file is not None:
            _VOCABULARIES[self.folder] = ((file, index_files[file]), self._vocab)
            self._read = len(self._vocab)  # what is on disk now: nothing to take back

    def release(self) -> None:
        """Take back the terms this refresh added to a kept vocabulary it did not write."""
        vocab = self._vocab
        if vocab is None or self._read < 0 or len(vocab) == self._read:
            return
        added = len(vocab) - self._read
        for term in [t for _, t in zip(range(added), reversed(vocab), strict=False)]:
            del vocab[term]


_VOCABULARIES: dict[Path, tuple[tuple[str, str], Vocabulary]] = {}


def _stamp(path: Path) -> tuple[int, int, int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        return (0, 0, 0)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


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


def _report_for(damage: str | None) -> IndexReport:
    """A new report; when the previous index is not used, why (``damage``) is said in it."""
    return IndexReport(
        rebuilt_from_corruption=damage is not None,
        rebuilt_from_older_version=damage == storage.OLDER_VERSION,
    )


def _merge(old: list[str], new: list[str]) -> list[str]:
    return list(dict.fromkeys([*old, *new]))


def remove_kb(home: Path, name: str) -> None:
    """Delete a knowledge base; KnowledgeBaseNotFound when there is none of that name."""
    kb = KnowledgeBase(home, name)
    if not kb.folder.is_dir():
        raise KnowledgeBaseNotFound(f"No knowledge base named {name!r}")
    # Renamed first so that a half-deleted folder is never listed or searched.
    trash = kb.folder.with_name(f".removing-{name}-{uuid.uuid4().hex}")
    move(kb.folder, trash, durable=False)
    _VOCABULARIES.pop(kb.folder, None)
    shutil.rmtree(trash, ignore_errors=True)
