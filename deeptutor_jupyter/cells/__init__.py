"""Every cell the tutor writes goes through here: a book's notebook, "insert this example below",
an exercise added next to the learner's.

Two paths, one rule (the learner's work is never lost):

* the notebook is open in JupyterLab and the labextension answers: cells go into its notebook
  model, as if typed (undo works, no file conflict, collaboration-safe) (``Frontend``);
* otherwise the file: read with its fingerprint, written atomically with a checkpoint of the
  bytes replaced, refused when the file changed on disk since it was read
  (cells/notebook_file.py).

Inserting adds cells and touches none of the learner's. Editing an existing cell needs the
learner's explicit confirmation: a ``Confirmed`` is only made from an answered ask_user form of the
same conversation whose chosen option is ``apply`` (``confirmed_edit``), never from the model's
word. Cell metadata keys the tutor writes are documented in docs/book.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import Field

from deeptutor_jupyter.cells.notebook_file import (
    CellError,
    NotebookChanged,
    NotebookFile,
    checkpoint_path,
    new_cell_id,
    read,
    write_back,
)
from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.tools.light import APPLY  # the confirmation's option id (edit_cell's words)

__all__ = [
    "APPLY",
    "CellError",
    "Confirmed",
    "Frontend",
    "FrontendUnavailable",
    "NewCell",
    "NotebookChanged",
    "NotebookFile",
    "checkpoint_path",
    "confirmed_edit",
    "edit_cell",
    "insert_cells",
    "read",
    "to_json",
    "write_back",
]


class NewCell(LazyModel):
    """A cell the tutor writes: its kind, its text, its tags and metadata."""

    cell_type: Literal["markdown", "code"] = "markdown"
    source: str
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class FrontendUnavailable(CellError):
    """No JupyterLab answered for this notebook: the file path is used instead."""

    code = "no_frontend"


class Frontend(Protocol):
    """JupyterLab's notebook model, reached through the labextension (kernel side)."""

    async def insert(
        self, cells: Sequence[NewCell], *, after: str | None, index: int | None
    ) -> list[str]: ...

    async def edit(self, cell_id: str, source: str) -> list[str]: ...


def to_json(cell: NewCell, *, with_id: bool = True) -> dict[str, Any]:
    metadata = dict(cell.metadata)
    if cell.tags:
        metadata["tags"] = list(cell.tags)
    out: dict[str, Any] = {"cell_type": cell.cell_type, "metadata": metadata, "source": cell.source}
    if with_id:
        out["id"] = new_cell_id()
    if cell.cell_type == "code":
        out["execution_count"] = None
        out["outputs"] = []
    return out


async def insert_cells(
    path: Path,
    cells: Sequence[NewCell],
    *,
    after: str | None = None,
    index: int | None = None,
    frontend: Frontend | None = None,
) -> list[str]:
    """Insert ``cells`` after the cell with id ``after`` (or at ``index``; default: the end).

    Returns the new cells' ids. Through JupyterLab when it answers, else the file.
    """
    if frontend is not None:
        try:
            return await frontend.insert(cells, after=after, index=index)
        except FrontendUnavailable:
            pass
    return insert_into_file(path, cells, after=after, index=index)


def insert_into_file(
    path: Path, cells: Sequence[NewCell], *, after: str | None = None, index: int | None = None
) -> list[str]:
    if not path.is_file():
        raise CellError(f"There is no notebook at {path}.")
    nb = read(path)
    position = _position(nb, after, index)
    with_id = _has_ids(nb)
    new = [to_json(cell, with_id=with_id) for cell in cells]
    nb.cells[position:position] = new
    write_back(nb)
    return [str(c.get("id", "")) for c in new]


@dataclass(frozen=True)
class Confirmed:
    """The learner's yes to one edit: made by ``confirmed_edit`` only."""

    cell_id: str
    request_id: str


def confirmed_edit(answer: Any, cell_id: str) -> Confirmed:
    """The confirmation an answered ask_user row gives for editing ``cell_id``.

    ``answer`` is the store's ``PendingRow`` of that form. Raises ``CellError`` when it is not
    an answered form naming this cell whose learner chose ``apply``.
    """
    if answer is None or getattr(answer, "kind", "") != "ask_user":
        raise CellError(
            "Editing a cell of the learner needs their confirmation first: ask with ask_user "
            f"(an option with id {APPLY!r}, naming cell {cell_id}), then pass that call's id."
        )
    if answer.status != "answered" or not answer.result:
        raise CellError("The learner has not answered the confirmation yet; nothing was changed.")
    if cell_id not in str(answer.payload):
        raise CellError(f"That confirmation does not name cell {cell_id}; nothing was changed.")
    if APPLY not in (answer.result.get("selections") or []) or answer.result.get("cancelled"):
        raise CellError("The learner did not confirm this change; their cell is unchanged.")
    return Confirmed(cell_id, answer.request_id)


async def edit_cell(
    path: Path, cell_id: str, source: str, confirmed: Confirmed, frontend: Frontend | None = None
) -> Path | None:
    """Replace the source of the learner's cell ``cell_id``, with their confirmation: in
    JupyterLab when it answers (undo brings the old text back), else in the file.

    Returns the file's checkpoint that keeps the notebook as it was (None in JupyterLab).
    """
    if confirmed.cell_id != cell_id:
        raise CellError(f"The confirmation is for cell {confirmed.cell_id}, not {cell_id}.")
    if frontend is not None:
        try:
            await frontend.edit(cell_id, source)
            return None
        except FrontendUnavailable:
            pass
    nb = read(path)
    cell = next((c for c in nb.cells if c.get("id") == cell_id), None)
    if cell is None:
        raise CellError(f"{path.name} has no cell with id {cell_id}.")
    cell["source"] = source
    return write_back(nb)


def _has_ids(nb: NotebookFile) -> bool:
    minor = nb.notebook.get("nbformat_minor", 0)
    return nb.notebook.get("nbformat", 4) > 4 or (isinstance(minor, int) and minor >= 5)


def _position(nb: NotebookFile, after: str | None, index: int | None) -> int:
    if after is not None:
        for number, cell in enumerate(nb.cells):
            if cell.get("id") == after:
                return number + 1
        raise CellError(f"{nb.path.name} has no cell with id {after}; nothing was inserted.")
    if index is None:
        return len(nb.cells)
    if not 0 <= index <= len(nb.cells):
        raise CellError(f"{nb.path.name} has {len(nb.cells)} cells; cannot insert at {index}.")
    return index
