"""The panel gets a run of streamed text as one event: only deltas of one stream merge (the same
kind, the same turn, the answer or the reading pass), and the merged event keeps the last seq."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from deeptutor_jupyter.agent.events import Content, Event, Notice, Thinking, TurnEvent
from deeptutor_jupyter.kernel.comm import coalesce
from deeptutor_jupyter.kernel.comm_messages import kernel_message


def event(seq: int, body: TurnEvent, turn_id: str = "t") -> Event:
    return Event(body, seq, turn_id, float(seq))


def test_only_deltas_of_one_stream_merge_and_keep_the_last_seq() -> None:
    events = [
        event(1, Content(text="a")),
        event(2, Content(text="b")),
        event(3, Content(text="c", explore=True)),  # the reading pass is another stream
        event(4, Thinking(text="d")),
        event(5, Thinking(text="e")),
        event(6, Content(text="f")),
        event(7, Content(text="g"), turn_id="u"),  # another turn
        event(8, Notice(text="n")),
        event(9, Notice(text="m")),  # only text deltas merge
    ]
    wire = coalesce(events)
    assert [(m["event"]["seq"], m["event"]["type"], m["event"]["text"]) for m in wire] == [
        (2, "content", "ab"),
        (3, "content", "c"),
        (5, "thinking", "de"),
        (6, "content", "f"),
        (7, "content", "g"),
        (8, "notice", "n"),
        (9, "notice", "m"),
    ]
    assert wire[0] == {
        "type": "event",
        "event": {"text": "ab", "type": "content", "seq": 2, "turn_id": "t", "ts": 1.0},
    }


def test_every_forwarded_event_fits_the_panels_contract_and_a_stampless_one_does_not() -> None:
    wire = coalesce([event(1, Content(text="a")), event(2, Notice(text="n", retry_in=1.0))])
    for message in wire:
        assert kernel_message(message).model_dump(mode="json") == message
    unstamped = {k: v for k, v in wire[0]["event"].items() if k != "seq"}
    with pytest.raises(ValidationError):
        kernel_message({"type": "event", "event": unstamped})
    with pytest.raises(ValidationError):  # the body is checked as strictly as ever
        kernel_message({"type": "event", "event": {**wire[0]["event"], "extra": 1}})
