"""Widgets that open with only the properties that are set (issue 28: bytes to the browser).

A mixin, kept apart from the turn view so that the view's anywidgets (answer_stream.py,
status_line.py), which the view imports lazily, need not import the view.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Lean"]


class Lean:
    """Opens with only the properties that are set: the frontend's model defaults every
    other one to null. A Layout's full state is ~40 null CSS properties (1.2 kB of a 1.7 kB
    open); an anywidget's carries ``tabbable`` and ``tooltip``. Updates are unchanged."""

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
        state: dict[str, Any] = super().get_state(key, drop_defaults)  # type: ignore[misc]
        if key is None:
            state = {k: v for k, v in state.items() if v is not None or k.startswith("_")}
        return state
