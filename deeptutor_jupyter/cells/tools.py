"""The model's two cell tools: ``insert_cells`` (adds, never touches the learner's cells) and
``edit_cell`` (changes a learner's cell, only with their confirmation). Both are deferred: most
turns never write a cell, so their schemas are loaded only when needed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from deeptutor_jupyter.cells import (
    APPLY,
    CellError,
    Frontend,
    NewCell,
    confirmed_edit,
    edit_cell,
    insert_cells,
)
from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult
from deeptutor_jupyter.tools.light import EDIT_CELL, INSERT_CELLS
from deeptutor_jupyter.words import plural

Locate = Callable[[], Path | None]
NO_NOTEBOOK = (
    "This kernel does not know its notebook file (it was not started by Jupyter for a saved "
    "notebook), so no cell can be written. Give the learner the cell's text instead."
)


class InsertCellsArgs(LazyModel):
    cells: list[NewCell] = Field(min_length=1, max_length=20, description="The cells, in order.")
    after: str | None = Field(None, description="Insert after the cell with this id.")
    index: int | None = Field(None, ge=0, description="Or insert at this position (0 = top).")


class InsertCellsTool(Tool[InsertCellsArgs]):
    name: ClassVar[str] = "insert_cells"
    description: ClassVar[str] = INSERT_CELLS
    Args: ClassVar[type[BaseModel]] = InsertCellsArgs
    deferred: ClassVar[bool] = True

    def __init__(self, locate: Locate, frontend: Callable[[], Frontend | None] = lambda: None):
        self.locate, self.frontend = locate, frontend

    async def run(self, args: InsertCellsArgs, ctx: ToolContext) -> ToolResult:
        path = self.locate()
        if path is None:
            return ToolResult(content=NO_NOTEBOOK, is_error=True, summary="no notebook file")
        try:
            ids = await insert_cells(
                path, args.cells, after=args.after, index=args.index, frontend=self.frontend()
            )
        except CellError as exc:
            return ToolResult(content=str(exc), is_error=True, summary=str(exc)[:80])
        words = f"Inserted {plural(len(ids), 'cell', 'cells')} into {path.name}: {', '.join(ids)}."
        return ToolResult(content=words, summary=words, data={"cell_ids": ids})


class EditCellArgs(LazyModel):
    cell_id: str = Field(description="The id of the learner's cell to change.")
    source: str = Field(description="The cell's new text.")
    confirmation: str = Field(
        description="The id of your ask_user call that asked the learner to confirm this change "
        f"(name the cell id in it, with an option whose id is {APPLY!r})."
    )


class EditCellTool(Tool[EditCellArgs]):
    name: ClassVar[str] = "edit_cell"
    description: ClassVar[str] = EDIT_CELL
    Args: ClassVar[type[BaseModel]] = EditCellArgs
    deferred: ClassVar[bool] = True

    def __init__(self, locate: Locate, frontend: Callable[[], Frontend | None] = lambda: None):
        self.locate, self.frontend = locate, frontend

    async def run(self, args: EditCellArgs, ctx: ToolContext) -> ToolResult:
        path = self.locate()
        if path is None:
            return ToolResult(content=NO_NOTEBOOK, is_error=True, summary="no notebook file")
        try:
            confirmed = confirmed_edit(self._answer(ctx, args.confirmation), args.cell_id)
            checkpoint = await edit_cell(
                path, args.cell_id, args.source, confirmed, self.frontend()
            )
        except CellError as exc:
            return ToolResult(content=str(exc), is_error=True, summary=str(exc)[:80])
        words = f"Changed cell {args.cell_id} of {path.name}"
        kept = f"the previous version is kept in {checkpoint}" if checkpoint else "undo restores it"
        return ToolResult(content=f"{words}; {kept}.", summary=words)

    @staticmethod
    def _answer(ctx: ToolContext, tool_call_id: str) -> Any:
        answered = ctx.deps.answered
        return answered(tool_call_id) if answered is not None else None
