"""``[mcp_servers.<name>]`` tables of settings.toml: how to reach each MCP server.

A server is a command (stdio: ``command``, ``args``, ``env``, ``cwd``) or a ``url`` (streamable
HTTP, with optional ``headers``). The values of ``env`` and ``headers`` are secrets: they reach
the server and nothing else (outputs, traces, logs are scrubbed of them). A bad table is a
readable problem, never a crash; the other servers still work.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")


class McpServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # Seconds a tool call may take before its card says the server hung.
    timeout: float = Field(60.0, gt=0)
    # Seconds the server may take to start and list its tools.
    startup_timeout: float = Field(20.0, gt=0)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if bool(self.command) == bool(self.url):
            raise ValueError("give either command (stdio) or url (streamable HTTP)")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return self

    def secrets(self) -> list[str]:
        return [*self.env.values(), *self.headers.values()]

    def where(self) -> str:
        """Where the server runs, for a listing: never its env or headers."""
        if self.url:
            return self.url
        return " ".join([self.command or "", *self.args])


@dataclass
class ServersConfig:
    servers: dict[str, McpServerConfig] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def read_servers(home: Path) -> ServersConfig:
    """The servers configured in ``home/settings.toml``; problems say what was skipped."""
    found = ServersConfig()
    try:
        with (home / "settings.toml").open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        return found
    except (OSError, tomllib.TOMLDecodeError) as exc:
        found.problems.append(f"settings.toml could not be read for mcp_servers: {exc}")
        return found
    tables = data.get("mcp_servers", {})
    if not isinstance(tables, dict):
        found.problems.append("settings.toml: mcp_servers must be a table of tables")
        return found
    for name, table in tables.items():
        problem = _add(found, name, table)
        if problem:
            found.problems.append(f"settings.toml: mcp_servers.{name} ignored ({problem})")
    return found


def _add(found: ServersConfig, name: str, table: Any) -> str:
    if not SERVER_NAME.fullmatch(name):
        return "a server name is 1 to 32 letters, digits, _ or -"
    if not isinstance(table, dict):
        return "not a table"
    try:
        found.servers[name] = McpServerConfig.model_validate(table)
    except ValidationError as exc:
        return "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'table'}: {e['msg']}" for e in exc.errors()
        )
    return ""
