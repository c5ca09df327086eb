"""The files of one knowledge base on disk, written so that a reader never trusts half of them.

Layout of ``$DEEPTUTOR_HOME/kb/<name>/``::

    manifest.json   sources, root, per-file hashes and chunk counts, checksums of the rest
    chunks.jsonl    one Chunk per line, in index order (row i of the index is line i)
    index/          the bm25s index (its own ``save`` format)

Write order: the index goes to a temp folder and is swapped in by rename, then chunks.jsonl
and manifest.json are each replaced atomically, the manifest last. The manifest carries the
SHA-256 of every other file, so a crash between two renames, a truncated file or a hand edit
shows up as a checksum mismatch on load, and the index is rebuilt instead of used.

bm25s and numpy are imported inside the functions that need them, never at module import.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deeptutor_jupyter._files import atomic_write_text, locked, private_tree
from deeptutor_jupyter.knowledge.model import Chunk

MANIFEST = "manifest.json"
CHUNKS = "chunks.jsonl"
INDEX_DIR = "index"
MANIFEST_VERSION = 1


class CorruptIndex(Exception):
    """Internal: the files on disk do not agree with the manifest. The message says how."""


@dataclass
class Loaded:
    """A verified index in memory: the chunks and the bm25s retriever over them."""

    manifest: dict[str, Any]
    chunks: list[Chunk]
    retriever: Any  # bm25s.BM25, or None for a knowledge base with no chunks


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
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
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CorruptIndex("manifest.json is missing") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CorruptIndex(f"manifest.json cannot be read ({exc})") from exc
    if not isinstance(data, dict) or data.get("version") != MANIFEST_VERSION:
        raise CorruptIndex("manifest.json has an unknown format")
    for key, kind in (("sources", list), ("files", dict), ("root", str), ("chunks", int)):
        if not isinstance(data.get(key), kind):
            raise CorruptIndex(f"manifest.json: {key!r} is missing or malformed")
    return data


def load_verified(folder: Path, tokenizer_version: int) -> Loaded:
    """Load chunks and index after checking every file against the manifest."""
    manifest = read_manifest(folder)
    if manifest.get("tokenizer") != tokenizer_version:
        raise CorruptIndex("the index was built with another tokenizer version")
    chunks = _load_chunks(folder, manifest)
    if not chunks:
        return Loaded(manifest, chunks, None)
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
        if sha256_file(index / name) != digest:
            raise CorruptIndex(f"index/{name} does not match its checksum")
    retriever = _load_retriever(index)
    if retriever.scores.get("num_docs") != len(chunks):
        raise CorruptIndex("the index and chunks.jsonl hold different numbers of chunks")
    return Loaded(manifest, chunks, retriever)


def _load_chunks(folder: Path, manifest: dict[str, Any]) -> list[Chunk]:
    path = folder / CHUNKS
    if not path.is_file():
        raise CorruptIndex("chunks.jsonl is missing")
    if sha256_file(path) != manifest.get("chunks_sha256"):
        raise CorruptIndex("chunks.jsonl does not match its checksum")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        chunks = [Chunk.from_json(json.loads(line)) for line in lines if line]
    except (ValueError, TypeError) as exc:
        raise CorruptIndex(f"chunks.jsonl cannot be parsed ({exc})") from exc
    per_file = sum(int(entry.get("chunks", -1)) for entry in manifest["files"].values())
    if not len(chunks) == manifest["chunks"] == per_file:
        raise CorruptIndex("chunk counts in manifest.json and chunks.jsonl disagree")
    return chunks


def _load_retriever(index: Path) -> Any:
    import bm25s  # type: ignore[import-untyped]

    try:
        return bm25s.BM25.load(index, show_progress=False)
    except Exception as exc:  # bm25s and numpy raise many kinds on a damaged file
        raise CorruptIndex(f"the bm25s index cannot be loaded ({type(exc).__name__})") from exc


def build_retriever(token_lists: list[list[str]]) -> Any:
    """A bm25s retriever over pre-tokenised chunks (ours, so Chinese works the same way)."""
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(token_lists, show_progress=False)
    return retriever


def write_all(folder: Path, manifest: dict[str, Any], chunks: list[Chunk], retriever: Any) -> None:
    """Write index, chunks and manifest in the crash-safe order described above."""
    folder.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(folder)
    index_files: dict[str, str] = {}
    if retriever is not None:
        staging = folder / f".index-new-{uuid.uuid4().hex}"
        retriever.save(staging, show_progress=False)
        private_tree(staging)  # bm25s writes with the umask's mode; the learner's files are 0600
        index_files = {p.name: sha256_file(p) for p in sorted(staging.iterdir())}
        _swap_in(staging, folder / INDEX_DIR)
    else:
        shutil.rmtree(folder / INDEX_DIR, ignore_errors=True)
    body = "".join(json.dumps(c.to_json(), ensure_ascii=False) + "\n" for c in chunks)
    atomic_write_text(folder / CHUNKS, body)
    manifest = {
        **manifest,
        "version": MANIFEST_VERSION,
        "chunks": len(chunks),
        "chunks_sha256": sha256_file(folder / CHUNKS),
        "index_files": index_files,
    }
    atomic_write_text(folder / MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=1))


def _swap_in(staging: Path, target: Path) -> None:
    # rename() cannot replace a non-empty folder, so the old one steps aside first. A crash
    # between the two renames leaves no index/ at all, which the checksums report.
    old = target.with_name(f".index-old-{uuid.uuid4().hex}")
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)


def _remove_leftovers(folder: Path) -> None:
    # Staging folders and temp files from an interrupted write; only a writer (under the lock)
    # removes them, so no other writer's staging folder can be in use.
    for leftover in folder.glob(".index-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    for leftover in folder.glob(".*.tmp"):
        leftover.unlink(missing_ok=True)
