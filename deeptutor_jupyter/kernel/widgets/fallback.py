"""A readable text fallback for every widget the tutor displays on its own.

A saved notebook keeps an output's ``text/plain`` and ``text/markdown`` next to the widget view;
GitHub, nbviewer and a notebook opened without a kernel show those. ipywidgets' default
``text/plain`` is the widget's repr (``MemoryWorkbench(children=(HTML(value='<h4>…``), so each
card says in words what it is instead. ``refresh_fallback`` re-sends the bundle once the card
settles (a receipt), when it was displayed with ``display(card, display_id=True)``.
"""

from __future__ import annotations

from typing import Any


class TextFallback:
    """Mixin for a widget class: ``class Card(TextFallback, widgets.VBox)``."""

    display_handle: Any = None  # the DisplayHandle of display(..., display_id=True), if any

    def fallback_markdown(self) -> str:
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        data: dict[str, Any] | None = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        if data is not None:
            text = self.fallback_markdown()
            data["text/plain"] = text
            data["text/markdown"] = text
        return data

    def refresh_fallback(self) -> None:
        if self.display_handle is not None:
            self.display_handle.update(self)
