"""Finding the files of a knowledge base's sources: what is indexed, what is skipped and said."""

from __future__ import annotations

import os
from pathlib import Path

from deeptutor_jupyter.knowledge.ingest import SUPPORTED_SUFFIXES

__all__ = ["MAX_FILE_BYTES", "discover"]

# Folders never worth indexing: VCS data, caches, checkpoints (names starting with "." too).
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})
MAX_FILE_BYTES = 50 * 1024 * 1024


def discover(sources: list[str], errors: list[str]) -> list[tuple[str, os.stat_result]]:
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
