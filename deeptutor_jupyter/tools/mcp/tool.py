"""One MCP server tool as a deferred tool of the tutor: ``mcp__<server>__<tool>``.

Its schema is the server's own input schema (a function-tool schema is plain JSON Schema), so it
is not derived from a pydantic model like the built-in tools; the arguments the model writes are
passed through and the server validates them. They are untrusted input from the model: a server
must treat them as such (docs/mcp.md).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult, clean_schema

if TYPE_CHECKING:
    from deeptutor_jupyter.tools.mcp.connection import McpConnection

PREFIX = "mcp__"
MAX_NAME = 64  # the longest function name OpenAI-compatible endpoints accept
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, with characters a function name may not hold replaced."""
    return (PREFIX + server + "__" + _UNSAFE.sub("_", tool))[:MAX_NAME]


class McpArgs(LazyModel):
    """Whatever the model wrote: the server's schema, not ours, decides what is valid."""

    model_config = ConfigDict(extra="allow")


class McpTool(Tool[McpArgs]):
    """Made per server tool by ``mcp_tool``; it calls the tool through its server connection."""

    Args: ClassVar[type[BaseModel]] = McpArgs
    deferred: ClassVar[bool] = True
    remote: ClassVar[str] = ""
    input_schema: ClassVar[dict[str, Any]] = {}

    def __init__(self, connection: McpConnection) -> None:
        self.connection = connection

    @classmethod
    def schema(cls) -> dict[str, Any]:
        parameters = clean_schema(dict(cls.input_schema)) or {"type": "object"}
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        return {
            "type": "function",
            "function": {
                "name": cls.name,
                "description": cls.description,
                "parameters": parameters,
            },
        }

    async def run(self, args: McpArgs, ctx: ToolContext) -> ToolResult:
        return await self.connection.call(self.remote, args.model_dump(), ctx)


def mcp_tool(
    connection: McpConnection, remote: str, description: str, schema: dict[str, Any]
) -> McpTool:
    """A tool for ``remote`` on this connection's server."""
    name = tool_name(connection.name, remote)
    first = (description or f"{remote} (MCP server {connection.name})").strip()
    cls = type(
        f"McpTool_{name}",
        (McpTool,),
        {
            "name": name,
            "description": f"[MCP {connection.name}] {first}",
            "remote": remote,
            "input_schema": schema,
        },
    )
    tool: McpTool = cls(connection)
    return tool
