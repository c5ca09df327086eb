"""The Unix socket students' kernels reach the service through on a one-machine hub.

A loopback port is free while the service restarts, and any student's process may bind it and
receive the next kernel's token. A socket in a folder only the service's user may create files
in cannot be taken over that way: a student cannot place a socket there, nor rename the folder
and put their own in its place. The kernel also checks the socket's holder is the service's
uid before it sends anything (deeptutor_jupyter/providers/hub_link.py).
"""

from __future__ import annotations

import logging
import os
import socket
import stat
from pathlib import Path

from deeptutor_jupyter.hub.settings import ServiceConfigError

SOCKET_ENV = "DEEPTUTOR_HUB_SOCKET"
log = logging.getLogger(__name__)


def private_folder_problem(folder: Path, uid: int) -> str | None:
    """Why someone other than ``uid`` (or root) could put a file in ``folder``, or None.

    The folder must be ``uid``'s and writable by nobody else; each folder above it must be
    root's or ``uid``'s and writable by nobody else unless sticky (/tmp), so nobody can move
    it aside."""
    st = folder.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022:
        return (
            f"{folder} must be a folder owned by uid {uid} that nobody else may write "
            f"(it is uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o})"
        )
    # The path as written and the folders it leads through (/var/run -> /run): a link's own
    # mode means nothing (always 0777), its owner and the folder holding it do.
    for above in dict.fromkeys([*folder.parents, *folder.resolve().parents]):
        st = above.lstat()
        loose = st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX
        if st.st_uid not in (0, uid) or (loose and not stat.S_ISLNK(st.st_mode)):
            return f"{above} may be changed by other users, so {folder} could be replaced"
    return None


def closed_to_others(folder: Path) -> Path | None:
    """The first folder on the way to ``folder`` that other users may not pass through (no
    ``o+x``): students' kernels would fail to connect with a bare "Permission denied". A group
    may still grant it, so this is a warning, not a refusal."""
    for step in [*reversed(folder.resolve().parents), folder.resolve()]:
        if not step.stat().st_mode & stat.S_IXOTH:
            return step
    return None


def bind_kernel_socket(path: str) -> socket.socket:
    """Listen on ``path``, creating its folder (0755) if needed; refuse a folder others control."""
    where = Path(path)
    if not where.is_absolute():
        raise ServiceConfigError(f"{SOCKET_ENV}={path} must be an absolute path")
    folder = where.parent
    if not folder.exists():
        try:
            folder.mkdir()
            folder.chmod(0o755)  # whatever the umask: students must reach the socket
        except OSError as exc:
            raise ServiceConfigError(
                f"{SOCKET_ENV}: cannot create {folder}: {exc.strerror}"
            ) from None
    problem = private_folder_problem(folder, os.geteuid())
    if problem:
        raise ServiceConfigError(f"{SOCKET_ENV}: {problem}")
    closed = closed_to_others(folder)
    if closed is not None:
        log.warning(
            "%s: other users may not pass through %s (mode %o): students' kernels cannot reach "
            "%s unless a group grants it; choose socket_dir outside it (docs/hub.md)",
            SOCKET_ENV,
            closed,
            stat.S_IMODE(closed.stat().st_mode),
            where,
        )
    from tornado.netutil import bind_unix_socket

    # Students connect (which needs write permission on the socket), they cannot replace it.
    return bind_unix_socket(str(where), mode=0o666)
