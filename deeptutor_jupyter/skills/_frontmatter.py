"""The front matter of a SKILL.md, read as a real YAML parser (PyYAML's safe loader) reads it.

Skills written for other agents use nested maps (``metadata: {author: ...}``), quoted strings,
block scalars and lists; a real parser reads them all. Only a mapping at the top is accepted, so
a malformed skill is reported and skipped rather than half understood.
"""

from __future__ import annotations

import re
from typing import Any

from deeptutor_jupyter.errors import DeepTutorError

# The flat front matter of most skills (the built-in ones too) read without PyYAML: importing
# it cost ~9 ms of a kernel's first request (issue 28). Only lines whose YAML reading is beyond
# doubt are taken (``key: words``, ``key: [word, word]``, ``key: true|false``); any other text,
# whatever it is, goes to the real parser, so the result is always what YAML reads.
_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):( +)(.*)")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_LIST = re.compile(r"\[([A-Za-z0-9_, -]*)\]")
# YAML 1.1 words a plain scalar starting with a letter may resolve to (bool, null).
_SPECIAL = frozenset(["yes", "no", "true", "false", "on", "off", "y", "n", "null"])
_BOOLS = {"true": True, "false": False}


class FrontMatterError(DeepTutorError, ValueError):
    code = "skill_front_matter"


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
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
    flat = _flat(lines[1:end])
    if flat is not None:
        return flat, body
    import yaml  # only for front matter beyond the flat lines, never at %load_ext

    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        raise FrontMatterError(f"cannot read the front matter{line}: {exc}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise FrontMatterError("the front matter must be 'key: value' lines")
    return {str(k): v for k, v in meta.items()}, body


def _flat(lines: list[str]) -> dict[str, Any] | None:
    """The mapping YAML reads from these lines when each is a plain ``key: value`` of the
    simplest kind; None for anything else (the caller then asks YAML)."""
    out: dict[str, Any] = {}
    for line in lines:
        match = _LINE.fullmatch(line)
        if match is None or match[1].lower() in _SPECIAL or match[1] in out:
            return None
        value = _value(match[3].rstrip(" "))
        if value is None:
            return None
        out[match[1]] = value
    return out


def _value(raw: str) -> str | bool | list[str] | None:
    if raw in _BOOLS:
        return _BOOLS[raw]
    items = _LIST.fullmatch(raw)
    if items is not None:
        words = [w.strip(" ") for w in items[1].split(",")] if items[1].strip(" ") else []
        ok = all(_WORD.fullmatch(w) and w.lower() not in _SPECIAL for w in words)
        return words if ok else None
    plain = (
        _WORD.match(raw) is not None  # starts with a letter: no indicator, number or date
        and raw.lower() not in _SPECIAL
        and raw.isprintable()  # no tab, control or byte-order character
        and ": " not in raw
        and " #" not in raw
        and not raw.endswith(":")
    )
    return raw if plain else None
