"""``check_exercise``: grade a learner's exercise cell with its hidden tests, in the sandbox.

An exercise cell (tagged ``exercise``, written by ``%tutor book`` or by an instructor with the
same keys, docs/book.md#cell-metadata) keeps its tests in ``metadata.deeptutor.hidden_tests``;
the learner's code is the cell's source in the saved notebook. The result says passed or
failed and why, never the reference solution.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult
from deeptutor_jupyter.tools.light import CHECK_EXERCISE
from deeptutor_jupyter.words import plural

RUN_SECONDS = 10.0


class CheckExerciseArgs(LazyModel):
    cell: int | None = Field(
        None,
        ge=0,
        description="The exercise's cell index (read_notebook shows them); all when absent.",
    )


def exercise_cells(notebook: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [
        (index, cell)
        for index, cell in enumerate(notebook.get("cells", []))
        if "exercise" in (cell.get("metadata") or {}).get("tags", [])
        and ((cell.get("metadata") or {}).get("deeptutor") or {}).get("hidden_tests")
    ]


class CheckExerciseTool(Tool[CheckExerciseArgs]):
    name: ClassVar[str] = "check_exercise"
    description: ClassVar[str] = CHECK_EXERCISE
    Args: ClassVar[type[BaseModel]] = CheckExerciseArgs
    deferred: ClassVar[bool] = True

    def __init__(self, locate: Callable[[], Path | None], sandbox: Any = None) -> None:
        self.locate, self.sandbox = locate, sandbox

    async def run(self, args: CheckExerciseArgs, ctx: ToolContext) -> ToolResult:
        from deeptutor_jupyter import cells
        from deeptutor_jupyter.learning.sandbox import Sandbox, feedback_of

        path = self.locate()
        if path is None:
            return ToolResult(content="No saved notebook to read.", is_error=True, summary="none")
        found = exercise_cells(cells.read(path).notebook)
        if args.cell is not None:
            found = [(i, c) for i, c in found if i == args.cell]
        if not found:
            words = "No exercise cell with hidden tests" + (
                f" at index {args.cell}." if args.cell is not None else " in the saved notebook."
            )
            return ToolResult(content=words, is_error=True, summary=words)
        sandbox = self.sandbox or Sandbox()
        lines, passed = [], 0
        for index, cell in found:
            source = cell.get("source", "")
            code = "".join(source) if isinstance(source, list) else str(source)
            tests = cell["metadata"]["deeptutor"]["hidden_tests"]
            outcome = await sandbox.run(code, tests, RUN_SECONDS)
            passed += outcome.passed
            mark = "passed" if outcome.passed else "not yet"
            lines.append(f"Cell {index}: {mark}. {feedback_of(outcome, RUN_SECONDS)}")
        exercises = plural(len(found), "exercise", "exercises")
        summary = f"Passed: {passed} of {exercises} (the saved notebook)"
        return ToolResult(content=f"{summary}.\n" + "\n".join(lines), summary=summary)
