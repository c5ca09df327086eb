"""A notebook file read with its fingerprint and written back only if nobody changed it since.

The learner's notebook is theirs: the tutor never truncates it, never writes a half file, and
never overwrites a save it did not read. ``read`` keeps what the file was (size, mtime, sha256);
``write_back`` writes the new notebook atomically (``_files.atomic_write_bytes``, the project's one
renamer) after copying the bytes it replaces to a checkpoint, and refuses with
``NotebookChanged`` when the file on disk is no longer the one that was read. The check and the
rename run under a lock on the notebook, so two tutor writes cannot interleave; JupyterLab does
not take that lock, which is why a notebook open in JupyterLab goes through its notebook model
instead (cells/__init__.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deeptutor_jupyter import _files
from deeptutor_jupyter.errors import DeepTutorError

CHECKPOINT_DIR = ".ipynb_checkpoints"
NEW_FILE_MODE = 0o644  # a notebook the learner shares with their course like any other


class CellError(DeepTutorError, ValueError):
    """A cell cannot be written as asked (no such cell, not a notebook); the text says why."""

    code = "cells"


class NotebookChanged(CellError):
    """The notebook changed on disk after the tutor read it: nothing was written."""

    code = "notebook_changed"


@dataclass(frozen=True)
class Fingerprint:
    size: int
    mtime_ns: int
    sha256: str


@dataclass
class NotebookFile:
    """One read of a notebook: its parsed JSON and what the file was when it was read."""

    path: Path
    notebook: dict[str, Any]
    seen: Fingerprint | None  # None: the file did not exist (a new notebook)
    raw: bytes = b""  # the bytes read (what a write keeps in the checkpoint)

    @property
    def cells(self) -> list[dict[str, Any]]:
        cells = self.notebook.setdefault("cells", [])
        assert isinstance(cells, list)
        return cells


def fingerprint(path: Path) -> tuple[Fingerprint, bytes] | None:
    try:
        data = path.read_bytes()
        info = path.stat()
    except FileNotFoundError:
        return None
    return Fingerprint(len(data), info.st_mtime_ns, hashlib.sha256(data).hexdigest()), data


def read(path: Path) -> NotebookFile:
    """The notebook at ``path`` (a missing file reads as an empty new notebook)."""
    found = fingerprint(path)
    if found is None:
        return NotebookFile(path, empty_notebook(), None)
    seen, data = found
    try:
        notebook = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CellError(f"{path.name} is not a notebook the tutor can read: {exc}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise CellError(f"{path.name} is not a Jupyter notebook (no list of cells).")
    return NotebookFile(path, notebook, seen, data)


def write_back(read_before: NotebookFile) -> Path | None:
    """Write ``read_before.notebook`` over the file it was read from, if that file is unchanged.

    Returns the checkpoint holding the bytes replaced (None for a new file). Raises
    ``NotebookChanged``, writing nothing, when the file was saved, created or deleted since.
    """
    path = read_before.path
    data = (json.dumps(read_before.notebook, indent=1, ensure_ascii=False) + "\n").encode()
    seen = read_before.seen

    def unchanged() -> None:
        found = fingerprint(path)
        now = found[0] if found is not None else None
        if now != seen:
            raise NotebookChanged(_changed_words(path, seen, now))

    with _files.locked(_lock_path(path)):
        unchanged()
        checkpoint = None
        mode = NEW_FILE_MODE
        if seen is not None:
            mode = stat.S_IMODE(path.stat().st_mode)
            checkpoint = checkpoint_path(path)
            _files.atomic_write_bytes(checkpoint, read_before.raw, mode=mode)
        # Checked again once the new bytes are on disk, right before the rename: a save the
        # learner made while they were written is not overwritten either.
        _files.atomic_write_bytes(path, data, mode=mode, before_rename=unchanged)
    after = fingerprint(path)
    read_before.seen = after[0] if after is not None else None  # the next write follows this one
    read_before.raw = data
    return checkpoint


def checkpoint_path(path: Path) -> Path:
    """Where the notebook's bytes before the tutor's last write are kept (next to Jupyter's
    own checkpoints, under a name Jupyter does not use)."""
    return path.parent / CHECKPOINT_DIR / f"{path.stem}-deeptutor-checkpoint{path.suffix}"


def _lock_path(path: Path) -> Path:
    return path.parent / CHECKPOINT_DIR / f".{path.name}.deeptutor.lock"


def _changed_words(path: Path, seen: Fingerprint | None, now: Fingerprint | None) -> str:
    if seen is None:
        what = "was created by someone else"
    elif now is None:
        what = "was deleted or moved"
    else:
        what = "was saved again"
    return (
        f"{path.name} {what} after the tutor read it, so the tutor wrote nothing (your work is "
        "as you left it). Save the notebook and ask again."
    )


def empty_notebook() -> dict[str, Any]:
    return {
        "cells": [],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def new_cell_id() -> str:
    return os.urandom(4).hex()
