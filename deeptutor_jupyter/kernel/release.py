"""A finished turn holds no widget (issue 28: 10 widgets a turn stayed alive, +87 kB of RSS).

Once a turn's final display is sent, its cell shows that static bundle, not the live view: the
view's widgets (status, text blocks, tool cards, receipts, their layouts and styles) are closed
so the kernel drops their models and the frontend its views. A card still waiting for an answer
(an ask_user form or a quiz left open) keeps the whole view alive: it must stay answerable.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

WAITING = ("open", "submitted")  # card states that still expect the learner


def release_finished_view(view: Any, final_bundles: Iterable[dict[str, Any]] = ()) -> bool:
    """Close every widget of a finished turn's view, called after its final display update;
    False (nothing closed) while a card waits, or while a final bundle still shows the view
    (a widget-view output whose model is closed would show nothing)."""
    from deeptutor_jupyter.kernel.display import WIDGET_MIME

    cards = getattr(view, "cards", {})
    if any(getattr(card, "state", "") in WAITING for card in cards.values()):
        return False
    if any(b.get(WIDGET_MIME, {}).get("model_id") == view.model_id for b in final_bundles):
        return False
    close_tree(view)
    cards.clear()
    return True


def close_tree(widget: Any) -> None:
    """Close ``widget``, its children (recursively) and their layout and style models; not a
    Layout every turn shares (turn_view.KernelLayout)."""
    from ipywidgets import Widget

    for child in getattr(widget, "children", ()) or ():
        close_tree(child)
    for part in (getattr(widget, "layout", None), getattr(widget, "style", None), widget):
        shared = getattr(part, "kernel_wide", False)
        if isinstance(part, Widget) and part.comm is not None and not shared:
            part.close()
