"""Typed tools the agent can call, and the registry that runs them."""

from __future__ import annotations

from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult
from deeptutor_jupyter.tools.calculate import CalculateTool
from deeptutor_jupyter.tools.registry import ToolRegistry, default_registry

__all__ = [
    "CalculateTool",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "default_registry",
]
