"""The streamed answer as an append-only channel (issue 28: bytes to the browser).

A widget's state is resent whole on each change, so an answer that grows was resent as it grew
(3.7x its bytes at 500 tokens a second, 6.6x at 100). Here the kernel keeps the text and sends
only what is new, as a custom message ``{"at": offset}`` with the new text as a UTF-8 buffer
(raw bytes: JSON would escape every newline and LaTeX backslash). The whole text is in the state
only where a browser needs it: the comm open and a ``request_state`` reply (a page reloaded
mid-answer shows all of it). A view that sees a gap (``at`` past its text: deltas that came
while a reloaded page was still building the model) asks once, ``{"resync": 1}``, and gets the
whole text at offset 0 (at most once per delta sent: a flood of resyncs costs one reply).
Offsets count UTF-16 units, the browser's string length.

The front end (answer_stream.js) keeps the text on its model and renders it with the
labextension's Markdown hook (labextension/src/answerhook.ts), or as plain text elsewhere; the
turn's final display update replaces it with static HTML either way (kernel/start.py).

Imported when a turn's first answer text arrives (and warmed, kernel/warm.py): not at
``%load_ext``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from deeptutor_jupyter.kernel.widgets.lean import Lean

__all__ = ["AnswerStream", "esm_source", "utf16_len"]


def utf16_len(text: str) -> int:
    """The length of ``text`` as the browser counts it (characters past U+FFFF count two)."""
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def esm_source(path: Path) -> str:
    """A front-end module as sent with every open: without its comments and indentation (they
    are for whoever reads the file; ~20% of the module). Line breaks stay, so no statement's
    end moves; the modules have no string that spans lines."""
    lines = (line.strip() for line in path.read_text("utf-8").splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("//"))


class AnswerStream(Lean, anywidget.AnyWidget):
    _esm = esm_source(Path(__file__).with_name("answer_stream.js"))
    # The ``[n]: link`` definitions put under each block that cites (set once, at the end).
    suffix = traitlets.Unicode("").tag(sync=True)

    def __init__(self, source: Callable[[], str], **kwargs: Any) -> None:
        self._source = source  # the whole text so far; read by the open (get_state)
        # Deltas sent, and their count at the last resync reply: a view that saw a gap saw a
        # delta sent after that reply (messages arrive in order, to every front end), so
        # without a new delta a resync is one that reply already answered.
        self._deltas = 0
        self._replied = -1
        super().__init__(**kwargs)
        self.on_msg(self._on_front_end)

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
        state: dict[str, Any] = super().get_state(key, drop_defaults)
        if key is None:  # the open and request_state: everything so far
            state["text"] = self._source()
        return state

    def append(self, at: int, text: str) -> None:
        """Send ``text``, which starts ``at`` UTF-16 units into the answer."""
        self._deltas += 1
        self.send({"at": at}, buffers=[text.encode()])

    def _on_front_end(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # At most one whole-text reply per delta: a flood of resyncs (anyone can send them
        # from a browser's console) costs nothing more than one.
        if isinstance(content, dict) and content.get("resync") and self._replied != self._deltas:
            self._replied = self._deltas
            self.send({"at": 0}, buffers=[self._source().encode()])
