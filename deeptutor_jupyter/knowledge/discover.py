"""Finding the files of a knowledge base's sources: what is indexed, what is skipped and said."""

from __future__ import annotations

import os
import stat
from operator import attrgetter
from pathlib import Path

from deeptutor_jupyter.knowledge.ingest import SUPPORTED_SUFFIXES

__all__ = ["MAX_FILE_BYTES", "discover", "discover_paths"]

# Folders never worth indexing: VCS data, caches, checkpoints (names starting with "." too).
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})
MAX_FILE_BYTES = 50 * 1024 * 1024
_NAME = attrgetter("name")


def discover(sources: list[str], errors: list[str]) -> dict[str, os.stat_result]:
    """Every supported file under the sources with its stat, once each, in a stable order.

    A symlink inside a source folder that resolves outside it is skipped and named: adding a
    folder must not make a private file elsewhere searchable (symlinked folders are not
    descended at all). A file named directly is indexed even when it is a link. The walk uses
    ``os.scandir``, whose entries carry what pathlib would ask the file system for again.

    A refresh stats every file and nothing else for the unchanged ones, so this loop is most
    of what a refresh with one changed file costs: it does one pass, and nothing per file
    beyond the stat and one dict insertion.
    """
    found: dict[str, os.stat_result] = {}
    skipped: list[str] = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            top = str(path.resolve())
            _walk(top, top, found, skipped)
        elif path.is_file():
            if path.suffix.lower() in SUPPORTED_SUFFIXES:
                resolved = path.resolve()
                _add(str(resolved), resolved.stat(), found, skipped)
            else:
                errors.append(
                    f"{source}: unsupported file type (supported: "
                    f"{', '.join(sorted(SUPPORTED_SUFFIXES))})"
                )
        else:
            errors.append(f"{source}: not found")
    errors += skipped
    return found


def discover_paths(
    sources: list[str], paths: list[str], errors: list[str]
) -> tuple[dict[str, os.stat_result], list[str]]:
    """``discover`` of only ``paths`` (absolute, resolved), files or folders that changed:
    (what is found, the paths looked at, each inside a source).

    The same rules as the whole walk: a path is looked at only inside a source folder (or when
    it is a source file), never below a hidden or skipped folder; a folder is walked; a file
    that is gone is simply not found (the caller drops what it had there). A path in no source
    is named in ``errors``.
    """
    found: dict[str, os.stat_result] = {}
    skipped: list[str] = []
    looked: list[str] = []
    for path in paths:
        top = _source_of(path, sources)
        if top is None:
            errors.append(f"{path}: not inside a source of this knowledge base")
            continue
        looked.append(path)
        if path != top:
            parts = path[len(top) :].strip("/").split("/")
            if any(p[:1] == "." or p in _SKIPPED_DIRS for p in parts[:-1]) or parts[-1][:1] == ".":
                continue
        if os.path.isdir(path) and not os.path.islink(path):
            if path == top or parts[-1] not in _SKIPPED_DIRS:
                _walk(path, top, found, skipped)
            continue
        if os.path.splitext(path)[1].lower() not in SUPPORTED_SUFFIXES:
            continue
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            continue  # gone: not found
        if stat.S_ISLNK(st.st_mode):
            if path == top:
                _add(os.path.realpath(path), os.stat(path), found, skipped)
            else:
                _add_link(path, top, found, skipped)
        elif stat.S_ISREG(st.st_mode):
            _add(path, st, found, skipped)
    errors += skipped
    return found, looked


def _source_of(path: str, sources: list[str]) -> str | None:
    """The resolved source that ``path`` is or lies in, or None."""
    for source in sources:
        top = os.path.realpath(source)
        if path == top or path.startswith(top.rstrip("/") + "/"):
            return top
    return None


def _add(
    name: str, st: os.stat_result, found: dict[str, os.stat_result], skipped: list[str]
) -> None:
    if name in found:
        return
    if st.st_size > MAX_FILE_BYTES:
        skipped.append(f"{name}: skipped, larger than {MAX_FILE_BYTES // 2**20} MB")
    else:
        found[name] = st


def _walk(folder: str, top: str, found: dict[str, os.stat_result], skipped: list[str]) -> None:
    # Depth first with names sorted: the same order as sorted(Path(top).rglob("*")). The
    # folder is scanned through a descriptor, so each entry's stat is an fstatat relative to
    # it instead of a walk down the whole path again (a tenth of a refresh's stat time).
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        with os.scandir(fd) as it:
            entries = sorted(it, key=_NAME)
    except OSError:
        os.close(fd)
        return
    prefix = folder.rstrip("/") + "/"
    suffixes, limit = SUPPORTED_SUFFIXES, MAX_FILE_BYTES
    is_reg, is_link = stat.S_ISREG, stat.S_ISLNK
    try:
        for entry in entries:
            name = entry.name
            if name[0] == ".":
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    if name not in _SKIPPED_DIRS:  # one descriptor open per level
                        _walk(prefix + name, top, found, skipped)
                    continue
                dot = name.rfind(".")
                if dot < 0 or name[dot:].lower() not in suffixes:
                    continue
                st = entry.stat(follow_symlinks=False)
                if is_link(st.st_mode):
                    _add_link(prefix + name, top, found, skipped)
                    continue
            except OSError:
                continue  # vanished while walking
            if not is_reg(st.st_mode):
                continue
            path = prefix + name
            if st.st_size > limit or path in found:
                _add(path, st, found, skipped)
            else:
                found[path] = st
    finally:
        os.close(fd)


def _add_link(path: str, top: str, found: dict[str, os.stat_result], skipped: list[str]) -> None:
    """A link inside a source folder: its target, if that is a file inside the folder."""
    target = os.path.realpath(path)
    if not os.path.isfile(target):
        return
    if os.path.commonpath([target, top]) != top:
        skipped.append(f"{path}: skipped, a link to a file outside the folder being added")
        return
    _add(target, os.stat(target), found, skipped)
