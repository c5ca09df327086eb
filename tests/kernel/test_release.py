"""A finished turn holds no widget (kernel/release.py): live widgets stay flat in the turns."""

from __future__ import annotations

import time
from types import SimpleNamespace

from ipywidgets.widgets import widget as widget_module

from deeptutor_jupyter.kernel.display import widget_bundle
from deeptutor_jupyter.kernel.release import release_finished_view
from deeptutor_jupyter.kernel.widgets.turn_view import TurnView, markdown_bundle
from deeptutor_jupyter.runtime.events import Event


def _event(kind: str, seq: int, **data: object) -> Event:
    return Event.from_row(kind, seq, "turn-1", dict(data), time.time())


def finished_turn() -> TurnView:
    """A view fed a whole turn: thinking, a tool card, paragraphs of text, a notice, done."""
    view = TurnView(model_label="custom/fake")
    events = [
        _event("thinking", 1, text="Let me see."),
        _event("tool_call", 2, id="c1", name="calculate", arguments='{"expression": "2+2"}'),
        _event("tool_result", 3, id="c1", name="calculate", content="4"),
        _event("content", 4, text="First paragraph.\n\n"),
        _event("content", 5, text="Second paragraph with `code`.\n\n" + "word " * 200),
        _event("notice", 6, text="A notice."),
        _event("done", 7, status="done"),
    ]
    for event in events:
        view.handle(event)
    return view


def live_after(turns: int) -> int:
    for _ in range(turns):
        view = finished_turn()
        assert release_finished_view(view, [markdown_bundle("the final static output")])
    return len(widget_module._instances)


async def test_widgets_alive_after_50_finished_turns_equal_those_after_5() -> None:
    base = live_after(1)  # the first turn opens the Layouts every turn shares
    after_5 = live_after(5)
    after_50 = live_after(45)
    assert after_5 == after_50 == base


async def test_a_view_the_final_display_still_shows_is_not_closed() -> None:
    view = finished_turn()
    assert not release_finished_view(view, [widget_bundle(view, "md", "turn-1")])
    assert view.comm is not None and view.status.comm is not None


async def test_a_card_waiting_for_the_learner_keeps_the_view_live_until_answered() -> None:
    view = finished_turn()
    card = SimpleNamespace(state="open")
    view.cards["req-1"] = card
    assert not release_finished_view(view)
    assert view.comm is not None
    card.state = "answered"
    assert release_finished_view(view)
    assert view.comm is None and view.status.comm is None and not view.cards
