"""The schemas of the tools a chat turn always sends, saved with the package (issue 28).

Building a tool's JSON Schema builds its pydantic arguments model first (~9 ms for the 11
tools a chat turn sends, ``make_quiz`` ~3 ms): a Run All's first request waited for that,
though the models are needed only once the model calls a tool. ``sent_schemas.json`` holds
those schemas as pydantic makes them; ``registry.schema_of`` takes a tool's from it when the
entry was made from the same class, name, description and arguments model, and builds it
otherwise. ``tests/tools/test_schema_file.py`` fails when the file differs from what the code
builds; write it again with ``python -m deeptutor_jupyter.kernel.warm``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from deeptutor_jupyter.tools.base import Tool

__all__ = ["FILE", "entry", "packaged", "saved_schema", "write"]

FILE = Path(__file__).with_name("sent_schemas.json")


def _path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def entry(cls: type[Tool[Any]]) -> dict[str, Any]:
    """What the file keeps for a tool class: where it and its arguments live, and its schema."""
    return {"tool": _path(cls), "args": _path(cls.Args), "schema": cls.schema()}


@functools.cache
def packaged() -> dict[str, dict[str, Any]]:
    """The file's entries by tool name ({} when it is missing or unreadable: schemas are built)."""
    try:
        data = json.loads(FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def saved_schema(tool: Tool[Any]) -> dict[str, Any] | None:
    """The saved schema of ``tool`` when it was made from the same class, name, description and
    arguments model; None otherwise (a tool of another class or language builds its own)."""
    saved = packaged().get(tool.name)
    if saved is None or saved.get("tool") != _path(type(tool)):
        return None
    if saved.get("args") != _path(tool.Args):
        return None
    schema = saved.get("schema")
    function = schema.get("function") if isinstance(schema, dict) else None
    if not isinstance(function, dict) or function.get("description") != tool.description:
        return None
    if function.get("name") != tool.name:
        return None
    return schema


def write(classes: list[type[Tool[Any]]]) -> Path:
    """Write the file for these tool classes (sorted by name, so it diffs well)."""
    entries = {cls.name: entry(cls) for cls in sorted(classes, key=lambda c: c.name)}
    FILE.write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return FILE
