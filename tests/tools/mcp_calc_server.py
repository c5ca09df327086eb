"""A small real MCP server for the tests (official SDK): stdio by default, streamable HTTP on
127.0.0.1 with ``--http PORT``. ``CALC_PID_FILE`` makes it write its pid there."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Annotated

from mcp.server.mcpserver import Elicit, ElicitationResult, MCPServer, Resolve
from pydantic import BaseModel, Field

app = MCPServer("calc")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def secret() -> str:
    """Say the token this server was configured with (a server that leaks its env)."""
    return "my token is " + os.environ.get("CALC_TOKEN", "")


@app.tool()
def boom() -> str:
    """Always fails."""
    raise ValueError("kaput")


@app.tool()
async def hang() -> str:
    """Never answers."""
    await asyncio.sleep(3600)
    return "late"


class Color(BaseModel):
    color: str = Field(json_schema_extra={"enum": ["red", "green", "blue"]}, title="Colour")


def want_color() -> Elicit[Color]:
    return Elicit("Which colour should the plot use?", Color)


@app.tool()
async def pick_color(color: Annotated[ElicitationResult[Color], Resolve(want_color)]) -> str:
    """Ask the learner for a colour."""
    if color.action == "accept":
        return f"chose {color.data.color}"
    return f"the learner chose to {color.action}"


if __name__ == "__main__":
    if os.environ.get("CALC_PID_FILE"):
        with open(os.environ["CALC_PID_FILE"], "w") as fh:
            fh.write(str(os.getpid()))
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
