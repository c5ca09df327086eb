"""The learner's files: private by default, replaced atomically, locked across processes.

Everything under ``$DEEPTUTOR_HOME`` is one learner's conversations and answers, so the home is
0700 and every file in it 0600, whatever the umask says (a classroom hub is a shared machine).
Documents are replaced, never rewritten in place: a temporary sibling is written, fsynced and
renamed over the old file, and the folder is fsynced so the rename itself survives a crash.
This module is the package's only renamer (``atomic_write_bytes`` for a file's new bytes,
``move`` for a finished file or folder); tests/test_files.py fails on an ``os.replace`` elsewhere.
Read-modify-write sequences hold an ``flock`` on a lock file; ``fcntl`` is imported only when a
lock is taken, so importing this module stays cheap and works where fcntl does not exist.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
# Test hook: seconds to sleep in the middle of a file's write, so a test can kill the writer
# while the temporary file is half written. Never set outside tests.
SLOW_WRITE_ENV = "DEEPTUTOR_MEMORY_TEST_SLOW_WRITE"


def ensure_private_dir(path: Path) -> bool:
    """Create ``path`` 0700 (with its parents); tighten it if it exists and others can read it.

    Returns True when an existing folder was tightened, so the caller can say so once.
    Parents the learner did not ask for (``~``) are created but never changed.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=DIR_MODE)
        os.chmod(path, DIR_MODE)  # mkdir's mode is filtered by the umask
        return False
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, mode & ~0o077 | 0o700)
        return True
    return False


def private_file(path: Path) -> None:
    """Make sure ``path`` exists and only its owner can read it (created 0600, never truncated).

    An existing file is only chmod-ed, never opened: closing any descriptor of a file drops
    every POSIX lock this process holds on it, so opening ``state.db`` while a SQLite connection
    of this process has it open would silently release that connection's locks (and another
    process could then checkpoint the WAL away under it).
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        tighten(path)
        return
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def tighten(path: Path) -> None:
    """chmod 0600 if the file exists (SQLite creates ``-wal``/``-shm`` with the umask's mode)."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            os.chmod(path, FILE_MODE)


def atomic_write_bytes(
    path: Path,
    data: bytes,
    *,
    mode: int = FILE_MODE,
    durable_rename: bool = True,
    before_rename: Callable[[], None] | None = None,
) -> None:
    """Replace ``path`` with ``data`` atomically: temp file, fsync, rename, fsync the folder.

    ``durable_rename=False`` leaves out the folder's fsync: after a crash ``path`` holds the
    old bytes or the new ones, both complete, and the write may be lost (for a file whose last
    write is redone anyway, such as an index refreshed from its sources). ``before_rename``
    runs once the new bytes are on disk, just before the rename: raising there writes nothing
    (a learner's notebook is checked for a save made meanwhile at the last moment).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.fchmod(fd, mode)
        half = len(data) // 2
        write_all(fd, data[:half])
        _slow_write_pause()
        write_all(fd, data[half:])
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.close(fd)
    try:
        if before_rename is not None:
            before_rename()
        move(tmp, path, durable=durable_rename)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def move(source: Path, target: Path, *, durable: bool = True) -> None:
    """Rename ``source`` over ``target`` in one step (a file, or a folder onto a missing or empty
    one); a reader sees the old ``target`` or the new, never a mix. ``durable`` fsyncs the
    folder so the rename survives a crash."""
    os.replace(source, target)
    if durable:
        fsync_dir(target.parent)


def _slow_write_pause() -> None:
    raw = os.environ.get(SLOW_WRITE_ENV)
    if raw:
        time.sleep(float(raw))


def atomic_write_text(path: Path, text: str, *, mode: int = FILE_MODE) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_new(path: Path, data: bytes) -> None:
    """Create ``path`` (private; it must not exist yet) holding ``data``, not fsynced: for
    files named by a write's generation, which a manifest names only after they are whole."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    # Makes a rename durable; some filesystems refuse to open a directory, which is fine.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def locked(lock_path: Path, *, blocking: bool = True) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path``; ``BlockingIOError`` if taken and non-blocking.

    flock locks belong to the open file description, so two opens in one process exclude each
    other exactly as two processes do. Lock files are never deleted: deleting one while another
    process holds it would let a third process lock a fresh inode. Without fcntl (Windows) the
    block runs unlocked: one kernel per learner is the common case there.
    """
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def private_tree(root: Path) -> None:
    """Folders 0700 and files 0600 under ``root`` (a library wrote them with the umask's mode)."""
    if not root.is_dir():
        tighten(root)
        return
    for folder, _dirs, files in os.walk(root):
        os.chmod(folder, DIR_MODE)
        for name in files:
            tighten(Path(folder) / name)


def read_head(path: Path | str, limit: int) -> bytes:
    """At most ``limit`` bytes from the start of a regular file that is not a link.

    For files someone else may have put there (a TUTOR.md in any folder above the notebook):
    the file is opened without following a link (``O_NOFOLLOW``) and without waiting on a FIFO
    (``O_NONBLOCK``), must be a regular file once open (``fstat``), and is read only as far as
    the caller keeps, so a 1 GiB file costs ``limit`` bytes. OSError otherwise.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        left = limit
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 16))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
