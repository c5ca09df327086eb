"""runtime/redact.py: every value scrubbed at any depth, and a stream scrubbed across deltas."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from deeptutor_jupyter.agent.events import (
    Content,
    Done,
    ErrorEvent,
    Event,
    Notice,
    ToolCallFinished,
)
from deeptutor_jupyter.runtime.events import EventLog
from deeptutor_jupyter.runtime.redact import MARK, StreamScrubber, scrub, usable
from deeptutor_jupyter.store.db import Store

KEY = "sk-test-0123456789"


def test_values_at_any_depth_are_scrubbed_and_untouched_ones_kept() -> None:
    data = {"a": [KEY, {"b": (f"x{KEY}y", 3)}], "c": "fine"}
    out = scrub(data, [KEY])
    assert out == {"a": [MARK, {"b": (f"x{MARK}y", 3)}], "c": "fine"}
    clean = {"c": "fine", "n": [1, 2]}
    assert scrub(clean, [KEY]) is clean
    assert usable(["short", "", KEY]) == [KEY]  # too short to redact without harm


@given(st.lists(st.integers(min_value=0, max_value=60), max_size=6), st.text(max_size=20))
def test_a_key_split_anywhere_across_deltas_never_comes_out(cuts: list[int], tail: str) -> None:
    text = f"before {KEY} middle {KEY}{tail}"
    points = sorted({min(c, len(text)) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    scrubber = StreamScrubber([KEY])
    out = "".join(scrubber.feed(p) for p in pieces) + scrubber.flush()
    assert KEY not in out
    assert out == text.replace(KEY, MARK)


def test_the_log_holds_back_a_possible_key_and_releases_it_with_the_next_event() -> None:
    log = EventLog("t", secrets=[KEY])
    seen: list[tuple[str, str]] = []
    log.subscribe(
        lambda e: seen.append((e.body.type, e.fields().get("text", e.fields().get("answer", ""))))
    )
    log.emit(Content(text="the key is sk-te"))  # might be the key: "sk-te" is held
    log.emit(Content(text="st-0123456789 and sk-"))  # completes it
    log.emit(Done(status="done", answer=f"the key is {KEY} and sk-"))
    texts = "".join(t for kind, t in seen if kind == "content")
    assert texts == f"the key is {MARK} and sk-"
    assert seen[-1] == ("done", f"the key is {MARK} and sk-")
    assert [e.seq for e in log.events] == list(range(1, len(log.events) + 1))


def test_a_typed_event_is_scrubbed_in_every_field_and_keeps_the_keys_its_emitter_set(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "state.db")
    try:
        log = EventLog("t", store, secrets=[KEY])
        seen: list[Event] = []
        log.subscribe(seen.append)
        log.emit(Content(text=f"see {KEY}", explore=True))  # held until the next event
        log.emit(ErrorEvent(kind="auth", message=f"rejected {KEY}", hint=f"[{KEY}]"))
        log.emit(ToolCallFinished(id="c", name="read", content="ok", data={"v": [KEY]}))
        assert [e.envelope() for e in seen] == [e.envelope() for e in log.events]
        rows = [(kind, data) for _seq, kind, data, _ts in store.events_with_time("t")]
        assert rows == [
            ("content", {"text": f"see {MARK}", "explore": True}),
            ("error", {"kind": "auth", "message": f"rejected {MARK}", "hint": f"[{MARK}]"}),
            ("tool_result", {"id": "c", "name": "read", "content": "ok", "data": {"v": [MARK]}}),
        ]
    finally:
        store.close()


def test_held_text_of_the_reading_pass_is_released_as_reading_text() -> None:
    log = EventLog("t", secrets=[KEY])
    log.emit(Content(text="notes sk-", explore=True))  # "sk-" might start the key: held
    log.emit(Notice(text="read", stage="end", explore=True))
    assert [(e.body.type, e.fields().get("text"), e.body.explore) for e in log.events] == [
        ("content", "notes ", True),
        ("content", "sk-", True),  # still the reading pass's card, not the answer
        ("notice", "read", True),
    ]
