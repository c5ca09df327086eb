"""A named knowledge base: remembered sources, an incremental BM25 index, and search.

Incremental by content hash: each file's SHA-256 is kept in the manifest, and a file whose hash
did not change keeps its chunks from chunks.jsonl without being read again. The BM25 index
itself is rebuilt from all chunks on every change (bm25s has no in-place update), which costs
milliseconds for thousands of chunks; the expensive part, reading PDFs and notebooks, is what
the hashes save.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable
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
    Chunk,
    Hit,
    IndexReport,
    KnowledgeBaseNotFound,
    KnowledgeIndexError,
    validate_kb_name,
)
from deeptutor_jupyter.knowledge.tokenize import TOKENIZER_VERSION, tokenize

__all__ = ["KnowledgeBase", "Progress", "list_kbs", "remove_kb"]

Progress = Callable[[int, int, str], None]

# Folders never worth indexing: VCS data, caches, checkpoints (names starting with "." too).
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})
MAX_FILE_BYTES = 50 * 1024 * 1024


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

        ``progress(done, total, current_file)`` is called with done=0 before the first file and
        after each file; the index is written after the last call.
        """
        new = [Path(p).expanduser().resolve() for p in paths]
        with storage.write_lock(self.folder):
            old, cached, damage = self._previous_state()
            report = IndexReport(rebuilt_from_corruption=damage is not None)
            if damage and old is None:
                report.errors.append(
                    f"the previous index was unreadable ({damage}); its sources are forgotten"
                )
            sources = _merge(old["sources"] if old else [], [str(p) for p in new])
            root = Path(old["root"]) if old else (self._new_root or Path.cwd()).resolve()
            return self._reindex(old, cached, sources, root, report, progress)

    def refresh(self, progress: Progress | None = None) -> IndexReport:
        """Re-scan the remembered sources: new, changed and deleted files are picked up."""
        with storage.write_lock(self.folder):
            old, cached, damage = self._previous_state()
            if old is None:
                raise self._unusable(damage)
            report = IndexReport(rebuilt_from_corruption=damage is not None)
            return self._reindex(old, cached, old["sources"], Path(old["root"]), report, progress)

    def _files_on_disk(self) -> list[Path]:
        return [p for p in self.folder.iterdir() if p.name != ".lock"]

    def _previous_state(
        self,
    ) -> tuple[dict[str, Any] | None, dict[str, list[Chunk]], str | None]:
        """(manifest or None, chunks by file to reuse, what was wrong or None)."""
        if not self.folder.exists() or not self._files_on_disk():
            return None, {}, None
        try:
            loaded = storage.load_verified(self.folder, TOKENIZER_VERSION)
        except storage.CorruptIndex as exc:
            try:
                manifest: dict[str, Any] | None = storage.read_manifest(self.folder)
            except storage.CorruptIndex:
                manifest = None
            return manifest, {}, str(exc)  # nothing on disk is trusted: re-read every file
        by_file: dict[str, list[Chunk]] = {}
        for chunk in loaded.chunks:
            by_file.setdefault(chunk.path, []).append(chunk)
        return loaded.manifest, by_file, None

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
        old: dict[str, Any] | None,
        cached: dict[str, list[Chunk]],
        sources: list[str],
        root: Path,
        report: IndexReport,
        progress: Progress | None,
    ) -> IndexReport:
        files = _discover(sources, report.errors)
        if report.rebuilt_from_corruption and old and old["files"] and not files:
            raise KnowledgeIndexError(
                f"The index of {self.name!r} is damaged and cannot be rebuilt: none of its "
                f"sources exist any more ({', '.join(sources)}). Remove it with "
                f"%tutor kb remove {self.name}"
            )
        old_files: dict[str, Any] = old["files"] if old else {}
        entries: dict[str, Any] = {}
        chunks: list[Chunk] = []
        if progress:
            progress(0, len(files), "")
        for done, path in enumerate(files, start=1):
            rel = relative_path(path, root)
            self._index_file(path, rel, root, old_files, cached, entries, chunks, report)
            if progress:
                progress(done, len(files), rel)
        report.removed = len(set(old_files) - set(entries))
        report.chunks = len(chunks)
        if report.changed or old is None or old.get("sources") != sources:
            self._write(old, sources, root, entries, chunks)
        return report

    def _index_file(
        self,
        path: Path,
        rel: str,
        root: Path,
        old_files: dict[str, Any],
        cached: dict[str, list[Chunk]],
        entries: dict[str, Any],
        chunks: list[Chunk],
        report: IndexReport,
    ) -> None:
        try:
            digest = storage.sha256_file(path)
        except OSError as exc:
            report.errors.append(f"{rel}: cannot be read ({exc.strerror or exc})")
            return
        previous = old_files.get(rel)
        if previous and previous.get("sha256") == digest and rel in cached:
            found = cached[rel]
            report.unchanged += 1
        else:
            try:
                found = ingest_file(path, root, self.name)
            except IngestError as exc:
                report.errors.append(str(exc))
                return
            if previous:
                report.updated += 1
            else:
                report.added += 1
        entries[rel] = {"sha256": digest, "chunks": len(found), "source": str(path)}
        chunks.extend(found)

    def _write(
        self,
        old: dict[str, Any] | None,
        sources: list[str],
        root: Path,
        entries: dict[str, Any],
        chunks: list[Chunk],
    ) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        tokens = [tokenize(f"{c.title}\n{c.text}") for c in chunks]
        retriever = storage.build_retriever(tokens) if chunks else None
        manifest = {
            "name": self.name,
            "root": str(root),
            "sources": sources,
            "files": entries,
            "tokenizer": TOKENIZER_VERSION,
            "created_at": (old or {}).get("created_at", now),
            "updated_at": now,
        }
        storage.write_all(self.folder, manifest, chunks, retriever)
        self._cache = None

    # --- reading --------------------------------------------------------------------------------

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """The ``k`` best chunks for ``query``, best first; chunks scoring 0 are left out."""
        loaded = self._loaded()
        if loaded.retriever is None or k <= 0:
            return []
        ids = loaded.retriever.get_tokens_ids(tokenize(query))
        if not ids:
            return []
        import numpy as np

        scores = loaded.retriever.get_scores_from_ids(ids)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        root = str(loaded.manifest["root"])
        return [Hit(loaded.chunks[i], float(scores[i]), root) for i in top if scores[i] > 0]

    def _loaded(self) -> storage.Loaded:
        """The verified index, from memory while manifest.json is unchanged on disk."""
        stamp = self._stamp()
        if self._cache is not None and self._cache[0] == stamp:
            return self._cache[1]
        try:
            loaded = storage.load_verified(self.folder, TOKENIZER_VERSION)
        except storage.CorruptIndex as exc:
            if not self.folder.exists():
                raise self._unusable(None) from exc
            self.last_report = self.refresh()  # raises KnowledgeIndexError if it cannot
            loaded = storage.load_verified(self.folder, TOKENIZER_VERSION)
        self._cache = (self._stamp(), loaded)
        return loaded

    def _stamp(self) -> tuple[int, int, int]:
        try:
            st = (self.folder / storage.MANIFEST).stat()
        except FileNotFoundError:
            return (0, 0, 0)
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def verify(self) -> str | None:
        """None when the index on disk is sound, else what is wrong with it (nothing is fixed)."""
        try:
            storage.load_verified(self.folder, TOKENIZER_VERSION)
        except storage.CorruptIndex as exc:
            return str(exc)
        return None

    def info(self) -> dict[str, Any]:
        """``name, root, sources, files, chunks, updated_at`` from the manifest (not verified)."""
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
        return {
            "name": self.name,
            "root": manifest["root"],
            "sources": list(manifest["sources"]),
            "files": len(manifest["files"]),
            "chunks": manifest["chunks"],
            "updated_at": manifest.get("updated_at"),
        }


def _merge(old: list[str], new: list[str]) -> list[str]:
    return list(dict.fromkeys([*old, *new]))


def _discover(sources: list[str], errors: list[str]) -> list[Path]:
    """Every supported file under the sources, once each, in a stable order."""
    found: dict[Path, None] = {}
    for source in sources:
        path = Path(source)
        if path.is_dir():
            for candidate in sorted(path.rglob("*")):
                parts = candidate.relative_to(path).parts
                if any(p.startswith(".") or p in _SKIPPED_DIRS for p in parts):
                    continue
                if candidate.suffix.lower() in SUPPORTED_SUFFIXES and candidate.is_file():
                    found.setdefault(candidate.resolve(), None)
        elif path.is_file():
            if path.suffix.lower() in SUPPORTED_SUFFIXES:
                found.setdefault(path.resolve(), None)
            else:
                errors.append(
                    f"{source}: unsupported file type (supported: "
                    f"{', '.join(sorted(SUPPORTED_SUFFIXES))})"
                )
        else:
            errors.append(f"{source}: not found")
    too_big = [p for p in found if p.stat().st_size > MAX_FILE_BYTES]
    errors += [f"{p}: skipped, larger than {MAX_FILE_BYTES // 2**20} MB" for p in too_big]
    return [p for p in found if p not in too_big]


def list_kbs(home: Path) -> list[dict[str, Any]]:
    """``info()`` of every knowledge base under ``home/kb``, by name; damaged ones included."""
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
