"""Deferred tools: listed in one line each, loaded by exact name when the model needs them.

Keeping the always-sent schema surface small measurably helps weak models choose tools, while
every deferred tool stays one cheap call away. Loaded names persist for the session.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field

from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult


class LoadToolsArgs(LazyModel):
    names: list[str] = Field(min_length=1, description="Exact names from the deferred list.")


class LoadToolsTool(Tool[LoadToolsArgs]):
    """Intercepted by the orchestrator, which owns the live tool list of the turn."""

    name: ClassVar[str] = "load_tools"
    description: ClassVar[str] = (
        "Load deferred tools by their exact names (see the list of deferred tools in the "
        "instructions); they can be called right after."
    )
    Args: ClassVar[type[BaseModel]] = LoadToolsArgs

    async def run(self, args: LoadToolsArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult(content="load_tools is not available here.", is_error=True)


def deferred_manifest(tools: list[Tool[Any]], unavailable: list[str] | None = None) -> str:
    """One line a tool; ``unavailable`` lines say which configured sources failed, and why."""
    if not tools and not unavailable:
        return ""
    lines = [f"- {t.name}: {_first_line(t.description)[:160]}" for t in tools]
    lines += unavailable or []
    return "Deferred tools (call load_tools with their exact names to use them):\n" + "\n".join(
        lines
    )


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else ""
