"""Strip trace bundles from a notebook before it is shared, leaving every other byte alone.

A notebook is not re-serialised: re-dumping JSON can change key order, indentation, escapes or
number spellings that the author's tools chose. Instead a small scanner finds the exact text
span of each ``application/vnd.deeptutor.trace+json`` member (in an output's ``data`` and
``metadata``) and cuts it out together with one adjoining comma, so the result is what the
writer would have produced had the bundle never been there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.memory._files import atomic_write_text
from deeptutor_jupyter.memory.trace import TRACE_MIME

_WS = " \t\n\r"
_DECODER = json.JSONDecoder()


class NotebookError(DeepTutorError, ValueError):
    code = "notebook"

    """The file is not a JSON notebook this scrubber can edit."""


@dataclass
class _Node:
    """A parsed JSON object or array with the text spans the scrubber needs."""

    start: int
    end: int = 0
    # Object members: (key, key_start, value_end, value node or None for scalars).
    members: list[tuple[str, int, int, _Node | None]] = field(default_factory=list)
    items: list[_Node | None] = field(default_factory=list)


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _value(text: str, pos: int) -> tuple[_Node | None, int]:
    """Parse the value at ``pos`` (no leading space); return its node (containers) and end."""
    char = text[pos : pos + 1]
    if char == "{":
        return _object(text, pos)
    if char == "[":
        return _array(text, pos)
    try:
        _, end = _DECODER.raw_decode(text, pos)
    except ValueError as exc:
        raise NotebookError(f"not valid JSON at offset {pos}: {exc}") from None
    return None, end


def _object(text: str, pos: int) -> tuple[_Node, int]:
    node = _Node(pos)
    pos = _skip(text, pos + 1)
    if text[pos : pos + 1] == "}":
        node.end = pos + 1
        return node, node.end
    while True:
        if text[pos : pos + 1] != '"':
            raise NotebookError(f"expected a key at offset {pos}")
        key, after = _DECODER.raw_decode(text, pos)
        colon = _skip(text, after)
        if text[colon : colon + 1] != ":":
            raise NotebookError(f"expected ':' at offset {colon}")
        child, end = _value(text, _skip(text, colon + 1))
        node.members.append((key, pos, end, child))
        pos = _skip(text, end)
        if text[pos : pos + 1] == "}":
            node.end = pos + 1
            return node, node.end
        if text[pos : pos + 1] != ",":
            raise NotebookError(f"expected ',' or '}}' at offset {pos}")
        pos = _skip(text, pos + 1)


def _array(text: str, pos: int) -> tuple[_Node, int]:
    node = _Node(pos)
    pos = _skip(text, pos + 1)
    if text[pos : pos + 1] == "]":
        node.end = pos + 1
        return node, node.end
    while True:
        child, end = _value(text, pos)
        node.items.append(child)
        pos = _skip(text, end)
        if text[pos : pos + 1] == "]":
            node.end = pos + 1
            return node, node.end
        if text[pos : pos + 1] != ",":
            raise NotebookError(f"expected ',' or ']' at offset {pos}")
        pos = _skip(text, pos + 1)


def _member(node: _Node | None, key: str) -> _Node | None:
    for name, _, _, child in node.members if node is not None else []:
        if name == key:
            return child
    return None


def _cut_span(node: _Node, key: str) -> tuple[int, int] | None:
    """The span to delete so that ``node`` reads as if ``key`` had never been written."""
    for index, (name, start, end, _) in enumerate(node.members):
        if name != key:
            continue
        if index > 0:  # from the end of the previous value: takes the comma before it
            return node.members[index - 1][2], end
        if len(node.members) > 1:  # first of several: up to where the next key starts
            return start, node.members[1][1]
        return node.start + 1, node.end - 1  # the only member: leaves "{}"
    return None


def trace_spans(text: str) -> tuple[list[tuple[int, int]], int]:
    """Spans to cut (each bundle in ``data`` and its ``metadata`` entry) and the bundle count."""
    stripped = _skip(text, 0)
    if text[stripped : stripped + 1] != "{":
        raise NotebookError("a notebook is a JSON object")
    root, end = _object(text, stripped)
    if _skip(text, end) != len(text):
        raise NotebookError(f"unexpected text after the notebook at offset {end}")
    cells = _member(root, "cells")
    if cells is None or cells.members:
        raise NotebookError("no 'cells' list: only nbformat 4 notebooks can be scrubbed")
    spans, bundles = [], 0
    for cell in cells.items:
        outputs = _member(cell, "outputs")
        for output in outputs.items if outputs is not None else []:
            data = _member(output, "data")
            if data is None or (span := _cut_span(data, TRACE_MIME)) is None:
                continue
            spans.append(span)
            bundles += 1
            metadata = _member(output, "metadata")
            if metadata is not None and (meta_span := _cut_span(metadata, TRACE_MIME)):
                spans.append(meta_span)
    return sorted(spans), bundles


def scrub_text(text: str) -> tuple[str, int]:
    """``text`` without its trace bundles, and how many bundles were removed."""
    spans, bundles = trace_spans(text)
    for start, end in reversed(spans):
        text = text[:start] + text[end:]
    return text, bundles


def scrub_notebook(src: Path, dest: Path | None = None) -> int:
    """Remove trace bundles from ``src`` into ``dest`` (default: ``src`` itself, atomically).

    Returns the number of bundles removed. With none, ``src`` is left untouched and ``dest``
    receives an exact copy of its bytes.
    """
    src, target = Path(src), Path(dest) if dest is not None else Path(src)
    raw = src.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise NotebookError(f"{src} is not UTF-8 text") from None
    scrubbed, removed = scrub_text(text)
    if removed == 0 and target == src:
        return 0
    if removed == 0:
        target.write_bytes(raw)
        return 0
    atomic_write_text(target, scrubbed, mode=src.stat().st_mode & 0o7777)
    return removed


def count_bundles(src: Path) -> int:
    """How many trace bundles ``src`` holds, changing nothing."""
    try:
        text = Path(src).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise NotebookError(f"{src} is not UTF-8 text") from None
    return trace_spans(text)[1]
