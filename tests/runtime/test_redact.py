"""redact.py: every value scrubbed at any depth, and a stream scrubbed across deltas."""

from __future__ import annotations

import json
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
from deeptutor_jupyter.redact import (
    MARK,
    StreamScrubber,
    clean,
    forms,
    known,
    register,
    scrub,
    usable,
)
from deeptutor_jupyter.runtime.events import EventLog
from deeptutor_jupyter.store.db import Store

KEY = "sk-test-0123456789"


def test_values_at_any_depth_are_scrubbed_and_untouched_ones_kept() -> None:
    data = {"a": [KEY, {"b": (f"x{KEY}y", 3)}], "c": "fine"}
    out = scrub(data, [KEY])
    assert out == {"a": [MARK, {"b": (f"x{MARK}y", 3)}], "c": "fine"}
    clean = {"c": "fine", "n": [1, 2]}
    assert scrub(clean, [KEY]) is clean
    # too short to redact without harm; a long one in each of its forms
    assert set(usable(["short", "", KEY])) == forms(KEY)
    assert {KEY, KEY[::-1], "c2stdGVzdC0wMTIzNDU2Nzg5"} <= forms(KEY)


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


# --- the doors out of the loop (issue 23, item 4) ------------------------------------------------

DOOR_KEY = "sk-door-5a1e93c0d7"  # only these tests register it


def test_resolving_settings_registers_the_model_key_and_hub_tokens(tmp_path: Path) -> None:
    from deeptutor_jupyter.config import resolve_settings

    env = {
        "DEEPTUTOR_HOME": str(tmp_path),
        "DEEPTUTOR_PROVIDER": "custom",
        "DEEPTUTOR_API_KEY": "sk-resolved-7c2b11e0",
        "JUPYTERHUB_API_TOKEN": "hubtoken-4e5f6a7b8c",
    }
    resolve_settings(environ=env)
    assert {"sk-resolved-7c2b11e0", "hubtoken-4e5f6a7b8c"} <= set(known())
    assert clean("a sk-resolved-7c2b11e0 b") == f"a {MARK} b"


def test_every_store_write_and_memory_file_and_bundle_is_cleaned(tmp_path: Path) -> None:
    from deeptutor_jupyter.kernel.display import static_bundle
    from deeptutor_jupyter.memory._files import append_line, atomic_write_text
    from deeptutor_jupyter.store.db import PendingRow

    register(DOOR_KEY)
    store = Store(tmp_path / "state.db")
    try:
        store.ensure_session("s", "nb")
        store.record_turn_start("t", "s", f"my key {DOOR_KEY}", "m", None)
        row = PendingRow("r", "s", "t", "c", {"title": DOOR_KEY}, "pending", 0.0, 1e12, None, None)
        store.add_pending(row, {"loop": [DOOR_KEY[::-1]]})
        store.resolve_pending("r", "answered", {"custom_input": DOOR_KEY}, 1.0)
        assert store.get_turn("t").question == f"my key {MARK}"  # type: ignore[union-attr]
        assert store.get_pending("r").result == {"custom_input": MARK}  # type: ignore[union-attr]
    finally:
        store.close()
    atomic_write_text(tmp_path / "doc.md", f"- {DOOR_KEY}\n")
    append_line(tmp_path / "trace.jsonl", json.dumps({"q": DOOR_KEY}))
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert all(form.encode() not in raw for form in forms(DOOR_KEY))
    bundle = static_bundle(f"**You:** {DOOR_KEY}", "d", {"trace": {"q": DOOR_KEY}})
    assert DOOR_KEY not in json.dumps(bundle) and MARK in bundle["text/html"]
