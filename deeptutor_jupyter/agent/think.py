"""Reasoning that an endpoint writes into the content channel, wrapped in ``<think>`` tags.

Some providers (DeepSeek-R1 style deployments, many local servers) send their reasoning inline as
``<think>...</think>`` instead of on a separate field. Splitting it off while the stream is live
means every consumer downstream (the live cell, the stored message, the loop's "is there an
answer?" check) sees clean visible text, while the raw content still goes back to the model.
"""

from __future__ import annotations

import re
from typing import Literal

Kind = Literal["content", "thinking"]
Piece = tuple[Kind, str]

_NAMES = ("think", "thinking")
_OPEN_TAGS = tuple(f"<{name}>" for name in _NAMES)
_CLOSE_TAGS = tuple(f"</{name}>" for name in _NAMES)
_OPEN = re.compile(r"<(?:think|thinking)>", re.IGNORECASE)
# Outside a block a closing tag is still matched so that a stray one is dropped, not shown.
_ANY = re.compile(r"</?(?:think|thinking)>", re.IGNORECASE)
_CLOSE = re.compile(r"</(?:think|thinking)>", re.IGNORECASE)
_LONGEST_TAG = max(len(tag) for tag in _OPEN_TAGS + _CLOSE_TAGS)


def _held_from(buffer: str, tags: tuple[str, ...]) -> int:
    """Index where a possible, still incomplete tag starts at the end of ``buffer``.

    Only a suffix that is a proper prefix of a tag is held back, so ordinary text such as
    ``a < b`` is released as soon as it can no longer become a tag.
    """
    start = max(0, len(buffer) - _LONGEST_TAG + 1)
    for index in range(start, len(buffer)):
        if buffer[index] != "<":
            continue
        tail = buffer[index:].lower()
        if any(tag.startswith(tail) and tag != tail for tag in tags):
            return index
    return len(buffer)


class ThinkTagFilter:
    """Splits streamed content into visible text and thinking.

    ``<think>`` and ``<thinking>`` open a block (case-insensitive) and either closing tag ends it;
    tags nested inside a block are thinking text. A closing tag outside a block is dropped.
    """

    def __init__(self) -> None:
        self._buffer = ""
        self._inside = False

    @property
    def kind(self) -> Kind:
        return "thinking" if self._inside else "content"

    def feed(self, text: str) -> list[Piece]:
        self._buffer += text
        pieces: list[Piece] = []
        while True:
            pattern = _CLOSE if self._inside else _ANY
            match = pattern.search(self._buffer)
            if match is None:
                break
            _append(pieces, self.kind, self._buffer[: match.start()])
            if _OPEN.fullmatch(match.group()) or self._inside:
                self._inside = not self._inside
            self._buffer = self._buffer[match.end() :]
        tags = _CLOSE_TAGS if self._inside else _OPEN_TAGS + _CLOSE_TAGS
        held = _held_from(self._buffer, tags)
        _append(pieces, self.kind, self._buffer[:held])
        self._buffer = self._buffer[held:]
        return pieces

    def flush(self) -> list[Piece]:
        """Release what is held back; an unclosed block ends as thinking. The filter resets."""
        pieces: list[Piece] = []
        _append(pieces, self.kind, self._buffer)
        self._buffer = ""
        self._inside = False
        return pieces


def _append(pieces: list[Piece], kind: Kind, text: str) -> None:
    if not text:
        return
    if pieces and pieces[-1][0] == kind:
        pieces[-1] = (kind, pieces[-1][1] + text)
    else:
        pieces.append((kind, text))


def split_thinking(text: str) -> tuple[str, str]:
    """Visible text and thinking of a complete message, for content that did not stream."""
    think_filter = ThinkTagFilter()
    pieces = think_filter.feed(text) + think_filter.flush()
    visible = "".join(part for kind, part in pieces if kind == "content")
    thinking = "".join(part for kind, part in pieces if kind == "thinking")
    return visible, thinking
