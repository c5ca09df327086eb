"""The status line of a turn counts down a provider's retry instead of saying "starting…"."""

from __future__ import annotations

import time

from deeptutor_jupyter.agent.events import RoundStarted
from deeptutor_jupyter.kernel.widgets.turn_view import TurnView
from deeptutor_jupyter.runtime.events import Event


def notice(seq: int, **data: object) -> Event:
    return Event.from_row("notice", seq, "turn-1", dict(data), time.time())


def test_a_retry_notice_shows_a_countdown_on_the_status_line() -> None:
    view = TurnView(model_label="openai/gpt")
    reason = "rate limited by OpenAI"
    view.handle(notice(1, text=f"{reason}, retrying in 90 s", retry_in=90.0, reason=reason))
    assert "rate limited by OpenAI, retrying in 90 s" in view.status.value
    assert view.errors is None  # a countdown, not one more line per retry
    view._retry_at = time.monotonic() + 41.5  # what the ticker sees 48.5 s later
    view._render_status()
    assert "retrying in 42 s" in view.status.value


async def test_the_countdown_gives_way_to_the_answer() -> None:
    view = TurnView(model_label="openai/gpt", language="zh")
    view.handle(notice(1, text="x", retry_in=30.0, reason="rate limited by OpenAI"))
    assert "30 秒后重试" in view.status.value
    view.handle(Event(RoundStarted(round=1, phase="exploration"), 2, "turn-1", time.time()))
    view._render_status()
    assert "重试" not in view.status.value
