"""Crash-safe file primitives shared by every memory layer.

Documents are replaced, never rewritten in place: the new text goes to a temporary sibling that is
fsynced and then renamed over the old file, so a reader (or a writer killed with SIGKILL) sees the
old document or the new one, never a mix. Read-modify-write sequences hold an ``fcntl.flock`` on
a lock file, which serialises the kernels of one learner across processes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path

from deeptutor_jupyter._files import fsync_dir, locked, write_all

__all__ = ["append_line", "atomic_write_text", "locked", "read_text"]

# Test hook: seconds to sleep in the middle of a document write, so a test can kill the writer
# while the temporary file is half written. Never set outside tests.
SLOW_WRITE_ENV = "DEEPTUTOR_MEMORY_TEST_SLOW_WRITE"


def _slow_write_pause() -> None:
    raw = os.environ.get(SLOW_WRITE_ENV)
    if raw:
        time.sleep(float(raw))


def _tmp_prefix(path: Path) -> str:
    return f".{path.name}."


def atomic_write_text(path: Path, text: str, *, mode: int = 0o600) -> None:
    """Replace ``path`` with ``text`` atomically: temp file, fsync, rename, fsync the directory.

    Call it while holding the document's lock: leftover temporaries of the same document are
    then known to come from killed writers and are removed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(_tmp_prefix(path) + "*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()
    tmp = path.parent / f"{_tmp_prefix(path)}{secrets.token_hex(4)}.tmp"
    data = text.encode("utf-8")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, mode)
        half = len(data) // 2
        os.write(fd, data[:half])
        _slow_write_pause()
        write_all(fd, data[half:])
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def append_line(path: Path, line: str, *, fsync: bool = False) -> None:
    """Append one line with a single ``write`` on an ``O_APPEND`` descriptor.

    One write per line keeps concurrent appenders from interleaving inside a line; the caller
    still holds the log's lock so the dedupe check and the append are one step.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        write_all(fd, (line.rstrip("\n") + "\n").encode("utf-8"))
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
