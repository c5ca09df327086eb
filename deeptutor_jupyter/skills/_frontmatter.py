"""A small reader for the front matter of a SKILL.md, so skills need no YAML dependency.

Supported: ``key: value`` lines between ``---`` fences; values are strings (quoted or not),
``true``/``false``, inline lists ``[a, b]`` or block lists of ``- item`` lines, and ``>``/``|``
followed by indented lines. Anything else is an error, so a malformed skill is reported and
skipped rather than half understood.
"""

from __future__ import annotations

import re

Value = str | bool | list[str]

_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+(.*))?$")


class FrontMatterError(ValueError):
    pass


def split_front_matter(text: str) -> tuple[dict[str, Value], str]:
    """(front matter, body). Raises FrontMatterError when there is none or it is malformed."""
    text = text.lstrip("\ufeff")
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise FrontMatterError("SKILL.md does not start with a '---' front matter block")
    try:
        end = next(n for n in range(1, len(lines)) if lines[n].strip() == "---")
    except StopIteration:
        raise FrontMatterError("the front matter block is not closed with '---'") from None
    body = "\n".join(lines[end + 1 :]).strip("\n")
    return _parse(lines[1:end]), body


def _parse(lines: list[str]) -> dict[str, Value]:
    data: dict[str, Value] = {}
    n = 0
    while n < len(lines):
        line = lines[n]
        n += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _KEY.match(line)
        if match is None or line[0].isspace():
            raise FrontMatterError(f"cannot read front matter line {line.strip()!r}")
        key, raw = match.group(1), (match.group(2) or "").strip()
        if raw in ("", ">", "|", ">-", "|-"):
            block = []
            while n < len(lines) and (not lines[n].strip() or lines[n][0].isspace()):
                block.append(lines[n].strip())
                n += 1
            data[key] = _block(raw, block)
        else:
            data[key] = _scalar_or_list(raw)
    return data


def _block(marker: str, block: list[str]) -> Value:
    items = [item for item in block if item]
    if marker == "" and items and all(item.startswith("- ") for item in items):
        return [_unquote(item[2:].strip()) for item in items]
    if marker == "" and items:
        raise FrontMatterError("an indented value needs '>' or '|' after the key")
    joiner = "\n" if marker.startswith("|") else " "
    return joiner.join(items)


def _scalar_or_list(raw: str) -> Value:
    if raw.startswith("[") and raw.endswith("]"):
        inner = raw[1:-1].strip()
        return [_unquote(part.strip()) for part in inner.split(",")] if inner else []
    lowered = raw.lower()
    if lowered in ("true", "yes"):
        return True
    if lowered in ("false", "no"):
        return False
    return _unquote(raw)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
