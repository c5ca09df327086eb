"""Crash-safe file primitives shared by every memory layer.

Documents are replaced, never rewritten in place: the new text goes to a temporary sibling that is
fsynced and then renamed over the old file (``deeptutor_jupyter._files``, the package's one
renamer), so a reader (or a writer killed with SIGKILL) sees the old document or the new one,
never a mix. Read-modify-write sequences hold an ``fcntl.flock`` on
a lock file, which serialises the kernels of one learner across processes. Every text written
here is scrubbed of the keys first (redact.py): a memory document is read into later system
prompts, so a key written once would travel with every turn after it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from deeptutor_jupyter._files import SLOW_WRITE_ENV, atomic_write_bytes, locked, write_all
from deeptutor_jupyter.redact import clean

__all__ = ["SLOW_WRITE_ENV", "append_line", "atomic_write_text", "locked", "read_text"]


def _tmp_prefix(path: Path) -> str:
    return f".{path.name}."


def atomic_write_text(path: Path, text: str, *, mode: int = 0o600) -> None:
    """Replace ``path`` with ``text`` atomically (``deeptutor_jupyter._files``: temp file, fsync,
    rename, fsync the directory).

    Call it while holding the document's lock: leftover temporaries of the same document are
    then known to come from killed writers and are removed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(_tmp_prefix(path) + "*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()
    atomic_write_bytes(path, clean(text).encode("utf-8"), mode=mode)


def append_line(path: Path, line: str, *, fsync: bool = False) -> None:
    """Append one line with a single ``write`` on an ``O_APPEND`` descriptor.

    One write per line keeps concurrent appenders from interleaving inside a line; the caller
    still holds the log's lock so the dedupe check and the append are one step.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        write_all(fd, (clean(line).rstrip("\n") + "\n").encode("utf-8"))
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
