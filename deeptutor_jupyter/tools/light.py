"""Tools registered at every turn whose modules a chat request does not need (issue 28).

A chat turn sends neither the deferred tools' schemas (only a line each in the manifest: name
and description) nor the solve tools (mounted in solve turns only), yet every session
registers them. Importing their modules for that (the cells, book and solve packages, with
their models and dataclasses) cost a Run All's first request ~7 ms. ``LazyTool`` stands in
the registry with what a plan and the manifest read (name, description, deferred); its
arguments, schema and ``run`` come from the real tool, imported at first use. What the model
is sent is the real tool's: ``registry.schema_of`` builds the schema from it, and the loaded
tool must carry the same name, description and deferred flag as its stand-in.

The descriptions the manifest reads live here, and the tool classes take them from here.
"""

from __future__ import annotations

import importlib
from typing import Any

from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult

APPLY = "apply"  # the option id of a confirmation form that allows an edit (cells/)
SOLVE_TOOLS = ("solve_plan", "solve_check", "solve_replan")  # solve/tools.py

INSERT_CELLS = (
    "Insert new Markdown or code cells into the learner's notebook (after a cell id, at an "
    "index, or at the end). Never changes the learner's existing cells."
)
EDIT_CELL = (
    "Change one of the learner's cells, only after they confirmed it: first ask_user "
    f"(naming the cell id, an option with id {APPLY!r}), then call this with that call's id."
)
CHECK_EXERCISE = (
    "Grade the learner's exercise cells (tagged exercise) with their hidden tests in the "
    "sandbox, as saved in the notebook; says which pass and why one fails."
)


class LazyTool(Tool[Any]):
    """A registered tool whose class lives in ``module`` (``cls`` there, made with ``args``),
    imported when its arguments, schema, ``run`` or any other attribute is first needed.
    ``description`` None: read from the real tool too (a tool a chat turn never lists)."""

    def __init__(
        self,
        name: str,
        module: str,
        cls: str,
        *args: Any,
        deferred: bool,
        description: str | None = None,
    ) -> None:
        # Instance values in front of the class's: what plans and the manifest read.
        light = {"name": name, "deferred": deferred}
        if description is not None:
            light["description"] = description
        self.__dict__.update(light)
        self._where, self._args, self._light = (module, cls), args, light
        self._real: Tool[Any] | None = None

    def load(self) -> Tool[Any]:
        """The real tool, made once; its name, description and flag must be the stand-in's."""
        if self._real is None:
            module, cls = self._where
            real = getattr(importlib.import_module(module), cls)(*self._args)
            differ = [k for k, v in self._light.items() if getattr(real, k) != v]
            if differ:
                raise RuntimeError(f"{module}.{cls} differs from its stand-in in {differ}")
            self._real = real
        return self._real

    def __getattr__(self, attr: str) -> Any:  # Args, description, the tool's own fields
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self.load(), attr)

    async def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        return await self.load().run(args, ctx)


def real(tool: Tool[Any]) -> Tool[Any]:
    """The tool itself, loaded when it is a stand-in."""
    return tool.load() if isinstance(tool, LazyTool) else tool
