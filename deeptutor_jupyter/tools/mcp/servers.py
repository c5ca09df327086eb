"""The MCP servers of one session: configured from settings.toml, started at the first turn that
plans its tools (never at ``%load_ext``), once per kernel, all at once, each bounded by its
``startup_timeout``; stopped when the session closes or the process exits.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import weakref
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.tools.mcp.config import ServersConfig
from deeptutor_jupyter.tools.mcp.connection import McpConnection
from deeptutor_jupyter.tools.mcp.tool import PREFIX, mcp_tool, tool_name

if TYPE_CHECKING:
    from deeptutor_jupyter.tools.registry import ToolRegistry


class McpServers:
    """A tool source (tools/registry.py): its tools join the registry as deferred tools."""

    def __init__(self, config: ServersConfig | None = None) -> None:
        self.connections: dict[str, McpConnection] = {}
        self.problems: list[str] = []
        self._told: set[str] = set()  # failures already said in a turn's notice
        self._loop: asyncio.AbstractEventLoop | None = None
        _LIVE.add(self)
        if config is not None:
            self.configure(config)

    def configure(self, config: ServersConfig) -> None:
        """Take the servers of settings.toml; a server whose table changed starts afresh."""
        self.problems = list(config.problems)
        for name, server in config.servers.items():
            old = self.connections.get(name)
            if old is None or old.config != server:
                if old is not None:
                    self._retire(old)
                self.connections[name] = McpConnection(name, server)
        for name in [n for n in self.connections if n not in config.servers]:
            self._retire(self.connections.pop(name))

    def _retire(self, connection: McpConnection) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(
                lambda: self._loop and self._loop.create_task(connection.stop())
            )
        self._told.discard(connection.name)

    def secrets(self) -> list[str]:
        return [s for c in self.connections.values() for s in c.secrets]

    # the tool source -----------------------------------------------------------------------
    def pending(self) -> bool:
        """Servers may offer tools (so a turn mounts load_tools before they are registered)."""
        return any(
            c.state in ("not started", "starting", "ready") for c in self.connections.values()
        )

    async def discover(self, registry: ToolRegistry) -> list[str]:
        """Start the servers not started yet and register their tools; returns what the learner
        should be told once (a server that failed)."""
        waiting = [c for c in self.connections.values() if c.state == "not started"]
        if waiting:
            self._loop = asyncio.get_running_loop()
            await asyncio.gather(*(c.start() for c in waiting))
        for connection in self.connections.values():
            if connection.state == "ready" and not self._registered(registry, connection):
                self._register(registry, connection)
        news = []
        for connection in self.connections.values():
            if connection.state == "failed" and connection.name not in self._told:
                self._told.add(connection.name)
                news.append(f"MCP server {connection.name!r} did not start: {connection.error}")
        return news

    def _registered(self, registry: ToolRegistry, connection: McpConnection) -> bool:
        """Whether this registry holds this connection's tools (a session sharing the servers
        of another has its own registry)."""
        if not connection.tools:
            return True
        tool = registry.get(tool_name(connection.name, connection.tools[0].name))
        return getattr(tool, "connection", None) is connection

    def _register(self, registry: ToolRegistry, connection: McpConnection) -> None:
        prefix = f"{PREFIX}{connection.name}__"
        registry.unregister(lambda name: name.startswith(prefix))
        for remote in connection.tools:
            tool = mcp_tool(connection, remote.name, remote.description or "", remote.input_schema)
            if registry.get(tool.name) is None:
                registry.register(tool)

    def unavailable(self) -> list[str]:
        """Manifest lines for the servers whose tools cannot be offered."""
        return [
            f"- {PREFIX}{c.name}__*: unavailable (MCP server {c.name!r}: {c.error})"
            for c in self.connections.values()
            if c.state == "failed"
        ]

    # listing and stopping ------------------------------------------------------------------
    def status(self) -> list[dict[str, Any]]:
        """Each server: name, where it runs, state, error, tools (never its env or headers)."""
        return [
            {
                "name": c.name,
                "where": c.masked(c.config.where()),
                "transport": "http" if c.config.url else "stdio",
                "state": c.state,
                "error": c.error,
                "tools": [t.name for t in c.tools],
                "env": sorted(c.config.env),
            }
            for c in self.connections.values()
        ]

    async def aclose(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.connections.values()))

    def close(self) -> None:
        """Stop the servers from synchronous code: on the loop they run on when it runs,
        else by running that loop briefly (process exit)."""
        loop = self._loop
        if (
            loop is None
            or loop.is_closed()
            or not any(c.state in ("ready", "starting") for c in self.connections.values())
        ):
            return
        if loop.is_running():
            loop.call_soon_threadsafe(lambda: loop.create_task(self.aclose()))
            return
        # Exiting anyway if this fails: a stdio server also ends when its stdin closes.
        with contextlib.suppress(Exception):
            loop.run_until_complete(asyncio.wait_for(self.aclose(), 10))


def status_markdown(servers: McpServers | None) -> str:
    """``%tutor mcp``: each server, where it runs, its state and tools; env names, never values."""
    if servers is None or (not servers.connections and not servers.problems):
        return (
            "No MCP servers configured. Add a `[mcp_servers.<name>]` table to settings.toml "
            "(docs/mcp.md); their tools become deferred tools named `mcp__<name>__<tool>`."
        )
    lines = ["| server | runs | state | tools |", "|---|---|---|---|"]
    for s in servers.status():
        state = s["state"] + (f": {s['error']}" if s["error"] else "")
        if s["state"] == "not started":
            state += " (starts at the next turn)"
        env = f" (env: {', '.join(s['env'])})" if s["env"] else ""
        tools = ", ".join(f"`{tool_name(s['name'], t)}`" for t in s["tools"]) or "—"
        lines.append(f"| {s['name']} | `{_cell(s['where'])}`{env} | {_cell(state)} | {tools} |")
    lines += [f"- ⚠ {p}" for p in servers.problems]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


_LIVE: weakref.WeakSet[McpServers] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for servers in list(_LIVE):
        servers.close()
