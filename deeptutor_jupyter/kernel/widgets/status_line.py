"""A turn's status line, whose clock the browser advances (issue 28: bytes to the browser).

The kernel re-sent the whole line every second for its clock alone (every 10 s while the answer
streamed): ~0.5 kB a message, 0.17x of a 62 kB answer streamed at 100 tokens a second, more for a
turn that waits on tools. Here the line is sent when its words change; status_line.js advances
the elapsed time (``<span class="dt-clock" data-live>``) each second from the last value it got.
The state the browser asks for (the open, a page reloaded mid-turn: ``request_state``) is the line
as of now, so a late view's clock starts right. A retry's countdown is still the kernel's.

The line also draws the turn's Stop button while ``stop`` holds its label (a Button was two
more widgets a turn, its style and itself: ~3 kB of opens, closes and the view's children
resent to take it away). A click arrives as ipywidgets' Button sends it, ``{"event": "click"}``.

Imported with the turn's view (and warmed, kernel/warm.py): not at ``%load_ext``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from deeptutor_jupyter.kernel.widgets.answer_stream import esm_source
from deeptutor_jupyter.kernel.widgets.lean import Lean

__all__ = ["StatusLine"]


class StatusLine(Lean, anywidget.AnyWidget):
    _esm = esm_source(Path(__file__).with_name("status_line.js"))
    value = traitlets.Unicode("").tag(sync=True)  # HTML, as ipywidgets' HTML widget takes it
    stop = traitlets.Unicode("").tag(sync=True)  # the Stop button's label; "" shows none

    def __init__(
        self,
        source: Callable[[], str],
        on_stop: Callable[[], None] | None = None,
        **kwargs: Any,
    ) -> None:
        self._source = source  # the line as of now, its clock included
        self._on_stop = on_stop
        super().__init__(value=source(), **kwargs)
        self.on_msg(self._on_front_end)

    def _on_front_end(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # Only while the button shows: a click that crossed the turn's end stops nothing.
        clicked = isinstance(content, dict) and content.get("event") == "click"
        if clicked and self.stop and self._on_stop is not None:
            self._on_stop()

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
        state: dict[str, Any] = super().get_state(key, drop_defaults)
        if key is None:  # the open and request_state: the clock as of now
            state["value"] = self._source()
        return state
