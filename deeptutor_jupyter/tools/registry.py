"""The tools a turn may call, and the one place where a model's tool call becomes a result.

Everything the model can get wrong (a tool that does not exist, arguments that are not JSON or do
not validate, a tool that raises) comes back as an error ``ToolResult`` the model can read and
correct, so a bad call never ends the turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from deeptutor_jupyter.providers.base import ToolCall
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult
from deeptutor_jupyter.tools.light import real
from deeptutor_jupyter.tools.schema_file import saved_schema

_QUOTE_LIMIT = 300


class ToolSource(Protocol):
    """Where deferred tools come from at run time (MCP servers, tools/mcp/): asked for its
    tools when a turn starts, before the tool list and the manifest are built."""

    def pending(self) -> bool:
        """Tools may still come (so a turn mounts load_tools before they are known)."""
        ...

    async def discover(self, registry: ToolRegistry) -> list[str]:
        """Register what is new; returns what the learner should be told (once)."""
        ...

    def unavailable(self) -> list[str]:
        """Manifest lines for what was configured but cannot be offered, and why."""
        ...


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool[Any]] = ()) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self.sources: list[ToolSource] = []
        for tool in tools:
            self.register(tool)

    def unregister(self, which: Callable[[str], bool]) -> None:
        """Drop the tools whose names ``which`` accepts (a source's tools before it re-lists)."""
        for name in [n for n in self._tools if which(n)]:
            del self._tools[name]

    def pending_sources(self) -> bool:
        return any(source.pending() for source in self.sources)

    async def discover(self) -> list[str]:
        """Ask every source for its tools; what the learner should be told, in order."""
        notes: list[str] = []
        for source in self.sources:
            notes += await source.discover(self)
        return notes

    def unavailable(self) -> list[str]:
        return [line for source in self.sources for line in source.unavailable()]

    def why_missing(self, name: str) -> str:
        """The unavailable line (``- <prefix>*: ...``) that covers a tool name, or ""."""
        for line in self.unavailable():
            prefix = line.removeprefix("- ").split("*", 1)[0]
            if prefix and name.startswith(prefix):
                return line.removeprefix("- ")
        return ""

    def register(self, tool: Tool[Any]) -> None:
        if tool.name in self._tools:
            raise ValueError(f"A tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Schemas of the named tools, or of every tool that is not deferred.

        Built once per tool (see ``schema_of``); the dicts are shared, so callers must not
        modify them."""
        if names is None:
            return [schema_of(tool) for tool in self._tools.values() if not tool.deferred]
        wanted = list(names)
        unknown = [name for name in wanted if name not in self._tools]
        if unknown:
            raise KeyError(f"Unknown tools {unknown}; registered: {self.names()}")
        return [schema_of(self._tools[name]) for name in wanted]

    def validate(self, call: ToolCall) -> tuple[Tool[Any], BaseModel] | ToolResult:
        """The tool and its validated arguments, or the error result the model should read."""
        tool = self._tools.get(call.name)
        if tool is None:
            return _error(self._unknown_tool_message(call.name))
        tool = real(tool)
        parsed = _parse_arguments(tool.name, call.arguments)
        if isinstance(parsed, ToolResult):
            return parsed
        try:
            return tool, tool.Args.model_validate(parsed)
        except ValidationError as exc:
            return _error(f"Invalid arguments for tool {tool.name!r}:\n{_describe(exc)}")

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        checked = self.validate(call)
        if isinstance(checked, ToolResult):
            return checked
        tool, args = checked
        try:
            return await tool.run(args, ctx)
        except Exception as exc:  # CancelledError is a BaseException and propagates.
            return _error(f"Tool {tool.name!r} failed: {type(exc).__name__}: {exc}")

    def _unknown_tool_message(self, name: str) -> str:
        available = ", ".join(self.names()) or "none"
        if not name:
            return f"The tool call has no tool name. Available tools: {available}"
        return f"Unknown tool {name!r}. Available tools: {available}"


_SCHEMAS: dict[tuple[Any, ...], dict[str, Any]] = {}


def schema_of(tool: Tool[Any]) -> dict[str, Any]:
    """A tool's schema, built once: pydantic's JSON Schema and its cleaning cost about 1 ms a
    tool (ask_user's 0.93 ms), which every turn paid again (issue 14). The key holds all the
    schema is made of, so a tool whose name, description or arguments differ gets its own.
    A stand-in (tools/light.py) gives the schema of the tool it stands for. The tools a chat
    turn always sends take theirs from the package (schema_file.py): no model is built."""
    tool = real(tool)
    key = (type(tool), tool.name, tool.description, tool.Args)
    schema = _SCHEMAS.get(key)
    if schema is None:
        schema = _SCHEMAS[key] = saved_schema(tool) or tool.schema()
    return schema


def _error(message: str) -> ToolResult:
    return ToolResult(content=message, is_error=True, summary=message.splitlines()[0])


def _parse_arguments(tool_name: str, raw: str) -> dict[str, Any] | ToolResult:
    # Models often send "" for a tool without parameters; that means "no arguments".
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return _error(
            f"Invalid arguments for tool {tool_name!r}: not valid JSON ({exc}). "
            f"Received: {_quote(raw)}"
        )
    if not isinstance(value, dict):
        return _error(
            f"Invalid arguments for tool {tool_name!r}: expected a JSON object, "
            f"got {_json_type(value)}: {_quote(raw)}"
        )
    return value


def _json_type(value: Any) -> str:
    names = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
    return names.get(type(value), "null")


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"])
        label = f"field {where!r}" if where else "arguments"
        lines.append(f"- {label}: {error['msg']}")
    return "\n".join(lines)


def _quote(raw: str) -> str:
    return raw if len(raw) <= _QUOTE_LIMIT else raw[:_QUOTE_LIMIT] + "…"


def default_registry() -> ToolRegistry:
    """A registry holding the built-in tools."""
    from deeptutor_jupyter.tools.calculate import CalculateTool

    return ToolRegistry([CalculateTool()])
