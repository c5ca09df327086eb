"""``[mcp_servers.<name>]`` tables of settings.toml: how to reach each MCP server.

A server is a command (stdio: ``command``, ``args``, ``env``, ``cwd``) or a ``url`` (streamable
HTTP, with optional ``headers``). The values of ``env`` and ``headers`` are secrets: they reach
the server and nothing else (outputs, traces, logs are scrubbed of them). A bad table is a
readable problem, never a crash; the other servers still work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, model_validator

from deeptutor_jupyter.lazy_model import LazyModel

SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")


class McpServerConfig(LazyModel):
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
    # Ask the learner before each call (the arguments are the model's): allow or deny.
    approve: bool = False

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
            import tomllib  # only where there is a file (config.py's reason)

            data = tomllib.load(fh)
    except FileNotFoundError:
        return found
    except (OSError, ValueError) as exc:  # ValueError: tomllib.TOMLDecodeError, not UTF-8
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


COURSE_FILE = "TUTOR.md"
COURSE_KEY = "mcp_servers"


def restrict(found: ServersConfig, packs: list[tuple[str, Path]]) -> ServersConfig:
    """The servers a course allows: a pack (label, root) whose TUTOR.md front matter has
    ``mcp_servers: [name, ...]`` limits the learner's servers to the names its packs allow; the
    others are left out with a problem line. Without such a pack, nothing changes."""
    allowed: set[str] = set()
    by: list[str] = []
    for label, root in packs:
        names = _allow_list(root / COURSE_FILE, found.problems, label)
        if names is not None:
            allowed.update(names)
            by.append(label)
    if not by:
        return found
    kept = ServersConfig({n: c for n, c in found.servers.items() if n in allowed}, found.problems)
    for name in found.servers:
        if name not in allowed:
            listed = ", ".join(sorted(allowed)) or "none"
            kept.problems.append(
                f"mcp_servers.{name} not started: the course ({', '.join(by)}) allows {listed}"
            )
    return kept


def _allow_list(path: Path, problems: list[str], label: str) -> list[str] | None:
    from deeptutor_jupyter.skills._frontmatter import FrontMatterError, split_front_matter

    try:
        meta, _body = split_front_matter(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, FrontMatterError) as exc:
        # A course's list that cannot be read allows nothing rather than everything.
        problems.append(f"{label}: {COURSE_FILE} could not be read ({exc}); no server allowed")
        return []
    names = meta.get(COURSE_KEY) if isinstance(meta, dict) else None
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        problems.append(f"{label}: {COURSE_KEY} must be a list of server names; none allowed")
        return []
    return [str(n) for n in names]
