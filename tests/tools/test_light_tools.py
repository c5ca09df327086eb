"""Stand-ins for the deferred and solve tools (tools/light.py): a turn sends exactly what the
real tools would give, names, flags, schemas and manifest, byte for byte (issue 28)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.book.grading import CheckExerciseTool
from deeptutor_jupyter.cells.tools import EditCellTool, InsertCellsTool
from deeptutor_jupyter.kernel.notebook_context import kernel_tools
from deeptutor_jupyter.providers.base import ToolCall
from deeptutor_jupyter.runtime.plan import runtime_tools
from deeptutor_jupyter.solve.tools import SolveCheckTool, SolvePlanTool, SolveReplanTool
from deeptutor_jupyter.tools.base import Tool, ToolContext
from deeptutor_jupyter.tools.deferred import deferred_manifest
from deeptutor_jupyter.tools.light import LazyTool
from deeptutor_jupyter.tools.registry import ToolRegistry


def nowhere() -> Path | None:
    return None


# The real tools, made as the session made them before the stand-ins (where a notebook is found
# does not change what a turn is sent).
REAL: dict[str, Callable[[], Tool[Any]]] = {
    "insert_cells": lambda: InsertCellsTool(nowhere),
    "edit_cell": lambda: EditCellTool(nowhere),
    "check_exercise": lambda: CheckExerciseTool(nowhere),
    "solve_plan": SolvePlanTool,
    "solve_check": SolveCheckTool,
    "solve_replan": SolveReplanTool,
}


def registered() -> list[Tool[Any]]:
    return [*kernel_tools(None), *runtime_tools()]


def real_tools() -> list[Tool[Any]]:
    return [REAL[t.name]() if t.name in REAL else t for t in registered()]


def dumped(registry: ToolRegistry) -> str:
    tools = [t for n in registry.names() if (t := registry.get(n))]
    return json.dumps(
        {
            "names": registry.names(),
            "deferred": [t.deferred for t in tools],
            "schemas": registry.schemas(registry.names()),
            "manifest": deferred_manifest([t for t in tools if t.deferred]),
        }
    )


def test_a_turn_is_sent_what_the_real_tools_give_byte_for_byte() -> None:
    stand_ins = registered()
    assert sorted(t.name for t in stand_ins if isinstance(t, LazyTool)) == sorted(REAL)
    assert dumped(ToolRegistry(stand_ins)) == dumped(ToolRegistry(real_tools()))


def test_a_stand_in_runs_and_validates_as_its_tool(tmp_path: Path) -> None:
    registry = ToolRegistry(registered())
    tool = registry.get("check_exercise")
    assert isinstance(tool, LazyTool)
    checked = registry.validate(ToolCall(id="c1", name="check_exercise", arguments='{"cell": -1}'))
    assert not isinstance(checked, tuple) and checked.is_error and "cell" in checked.content
    ctx = ToolContext(session_id="s", turn_id="t", workspace=tmp_path)
    result = asyncio.run(tool.run(tool.Args(), ctx))  # no notebook file: the real tool says so
    assert result.is_error and result.content == "No saved notebook to read."


def test_a_stand_in_whose_words_differ_from_its_tool_fails_when_loaded() -> None:
    wrong = LazyTool(
        "check_exercise",
        "deeptutor_jupyter.book.grading",
        "CheckExerciseTool",
        lambda: None,
        deferred=True,
        description="Something else.",
    )
    with pytest.raises(RuntimeError, match="description"):
        wrong.load()
