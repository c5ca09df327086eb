"""A small TOML writer for settings.toml (the standard library reads TOML but cannot write it)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_str(key)


def _toml_str(value: str) -> str:
    out = value.replace("\\", "\\\\").replace('"', '\\"')
    out = out.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    out = re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\u{ord(m.group(0)):04x}", out)
    return f'"{out}"'


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # repr gives inf and nan, which TOML also spells that way
    if isinstance(value, str | Path):
        return _toml_str(str(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
        )
    if hasattr(value, "isoformat"):  # TOML dates and times are written unquoted
        return str(value.isoformat())
    raise TypeError(f"cannot write a value of type {type(value).__name__} to TOML")


def dump_toml(data: Mapping[str, Any], prefix: str = "") -> str:
    scalars = [(k, v) for k, v in data.items() if not isinstance(v, dict)]
    tables = [(k, v) for k, v in data.items() if isinstance(v, dict)]
    out = [f"{_toml_key(k)} = {_toml_value(v)}\n" for k, v in scalars]
    for key, table in tables:
        name = f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key)
        out.append(f"\n[{name}]\n")
        out.append(dump_toml(table, name))
    return "".join(out)
