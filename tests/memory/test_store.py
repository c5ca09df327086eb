"""MemoryStore on real files: L1 dedupe, preferences, ops validation, deletions, export."""

from __future__ import annotations

import json
import time
import zipfile
from pathlib import Path

import pytest

from deeptutor_jupyter.memory import (
    EMPTY_MEMORY,
    DocumentError,
    MemoryStore,
    TraceRecord,
    summarize_answer,
)

from .conftest import make_record


def test_emit_appends_one_line_per_trace_and_dedupes(store: MemoryStore) -> None:
    record = make_record("t_1", started_at=1_700_000_000.0, surface="quiz")
    assert store.emit(record) is True
    assert store.emit(record) is False
    day = store.root / "trace" / "quiz" / "2023-11-14.jsonl"
    lines = day.read_text().splitlines()
    assert len(lines) == 1
    assert TraceRecord.model_validate_json(lines[0]) == record
    # A fresh store (another kernel) sees the same ids on disk.
    assert MemoryStore(store.home).emit(record) is False


def test_traces_filter_by_surface_and_time(store: MemoryStore) -> None:
    store.emit(make_record("t_old", started_at=1000.0))
    store.emit(make_record("t_new", started_at=2000.0, surface="notebook"))
    assert [r.trace_id for r in store.traces()] == ["t_old", "t_new"]
    assert [r.trace_id for r in store.traces("notebook")] == ["t_new"]
    assert [r.trace_id for r in store.traces(since=1500.0)] == ["t_new"]


def test_a_damaged_line_does_not_hide_the_rest(store: MemoryStore) -> None:
    store.emit(make_record("t_1", started_at=1000.0))
    path = next((store.root / "trace" / "chat").glob("*.jsonl"))
    with path.open("a") as handle:
        handle.write("{not json\n")
    store.emit(make_record("t_2", started_at=1001.0))
    assert [r.trace_id for r in store.traces()] == ["t_1", "t_2"]


def test_trace_keeps_unknown_fields_and_drops_free_text_from_ask_user() -> None:
    record = make_record(
        "t_1",
        quiz={"score": 3},
        ask_user=[{"request_id": "r", "selections": ["a"], "customInput": "secret"}],
    )
    dumped = json.loads(record.model_dump_json())
    assert dumped["quiz"] == {"score": 3}
    assert dumped["ask_user"] == [{"request_id": "r", "selections": ["a"]}]


@pytest.mark.parametrize(("trace_id", "surface"), [("has space", "chat"), ("t_1", "../etc")])
def test_trace_rejects_ids_that_would_break_paths_or_footnotes(trace_id: str, surface: str) -> None:
    with pytest.raises(ValueError):
        make_record(trace_id, surface=surface)


def test_a_summary_reads_only_the_start_of_a_long_answer() -> None:
    # The tail is never scanned: a code fence still open at the end of what is read hides the
    # words after it, and the ellipsis says there is more.
    answer = "Intro words.\n```\n" + "x = 1\n" * 200_000 + "```\nAfter the code."
    assert summarize_answer(answer) == "Intro words. [code] …"
    assert summarize_answer("```\n" + "y" * 20_000 + "\n```\nshort", limit=400) == "[code] short"


def test_summarize_answer_is_plain_and_bounded() -> None:
    answer = "## Fractions\n**A fraction** is `a/b`.\n```python\nprint(1/2)\n```\n" + "more " * 200
    summary = summarize_answer(answer, limit=60)
    assert summary.startswith("Fractions A fraction is a/b. [code] more")
    assert len(summary) <= 60 and summary.endswith("…")
    assert summarize_answer(answer, 60) == summary


def test_missing_documents_read_as_empty(store: MemoryStore) -> None:
    assert store.read("L2", "chat").is_empty()
    assert store.read_text("L3", "profile") == ""
    assert store.read_l3_concat() == EMPTY_MEMORY
    assert store.system_prompt_block() == ""


@pytest.mark.parametrize(("layer", "key"), [("L4", "chat"), ("L3", "diary"), ("L2", "../x")])
def test_unknown_documents_are_refused(store: MemoryStore, layer: str, key: str) -> None:
    with pytest.raises(ValueError):
        store.read(layer, key)


@pytest.mark.parametrize(
    "again",
    ["Prefers short answers", "prefers short answers.", "  PREFERS   short answers!  "],
)
def test_preference_add_is_idempotent(store: MemoryStore, again: str) -> None:
    first = store.write_preference("add", "Prefers short answers.", trace_id="t_1")
    second = store.write_preference("add", again, trace_id="t_2")
    assert first.status == "added"
    assert second.status == "duplicate" and second.entry_id == first.entry_id
    doc = store.read("L3", "preferences")
    assert [(e.text, e.refs) for _, e in doc.entries()] == [("Prefers short answers.", ["t_1"])]


def test_preference_edit_keeps_provenance(store: MemoryStore) -> None:
    added = store.write_preference("add", "Answers in French", trace_id="t_1")
    edited = store.write_preference(
        "edit", "Answers in German", trace_id="t_2", entry_id=f"m_{added.entry_id}"
    )
    assert edited.status == "edited"
    ((_, entry),) = store.read("L3", "preferences").entries()
    assert (entry.text, entry.refs) == ("Answers in German", ["t_1", "t_2"])
    with pytest.raises(KeyError):
        store.write_preference("edit", "x", trace_id="t_3", entry_id="m_missing")
    with pytest.raises(ValueError, match="at most 240"):
        store.write_preference("add", "x" * 241, trace_id="t_3")


def test_ops_preview_then_apply(store: MemoryStore) -> None:
    store.emit(make_record("t_1"))
    ops = [{"op": "add", "section": "Level", "text": "Beginner in algebra", "refs": ["t_1"]}]
    preview = store.preview_ops("L3", "profile", ops)
    assert preview.valid and not preview.rejected
    assert "+- Beginner in algebra [^1]" in preview.diff
    assert store.read_text("L3", "profile") == ""  # a preview writes nothing
    applied = store.apply_ops("L3", "profile", ops)
    assert store.read_text("L3", "profile") == applied.after
    assert applied.after.startswith("## Level\n- Beginner in algebra [^1] <!--m_")


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        ({"op": "add", "section": "S", "text": "x" * 241, "refs": ["t_1"]}, "at most 240"),
        ({"op": "add", "section": "S", "text": "fine"}, "refs: Field required"),
        ({"op": "add", "section": "S", "text": "fine", "refs": []}, "at least 1"),
        ({"op": "add", "section": "S", "text": "fine", "refs": ["t_404"]}, "unknown reference"),
        ({"op": "edit", "id": "m_nope", "text": "fine", "refs": ["t_1"]}, "no entry with id"),
        ({"op": "delete", "id": "m_nope", "reason": "stale"}, "no entry with id"),
        ({"op": "delete", "id": "m_a", "reason": "boring"}, "reason: Input should be"),
        ({"op": "add", "section": "S", "text": "two\nlines", "refs": ["t_1"]}, "one line"),
        ({"op": "add", "section": "S", "text": "Known fact.", "refs": ["t_1"]}, "duplicate"),
        ({"op": "rename", "id": "m_a"}, "does not match any of the expected tags"),
        ("not an object", "valid dictionary"),
    ],
)
def test_invalid_ops_are_rejected_with_a_reason(
    store: MemoryStore, op: object, reason: str
) -> None:
    store.emit(make_record("t_1"))
    store.overwrite("L3", "profile", "## S\n- known fact [^1] <!--m_a-->\n\n[^1]: t_1\n")
    before = store.read_text("L3", "profile")
    result = store.apply_ops("L3", "profile", [op])  # type: ignore[list-item]
    assert not result.valid
    assert len(result.rejected) == 1 and reason in result.rejected[0][1]
    assert store.read_text("L3", "profile") == before


def test_valid_ops_apply_even_beside_invalid_ones(store: MemoryStore) -> None:
    store.emit(make_record("t_1"))
    ops = [
        {"op": "add", "section": "S", "text": "kept", "refs": ["t_1"]},
        {"op": "add", "section": "S", "text": "lost", "refs": ["t_404"]},
    ]
    result = store.apply_ops("L2", "chat", ops)
    assert [op["text"] for op in result.valid] == ["kept"]
    assert [e.text for _, e in store.read("L2", "chat").entries()] == ["kept"]


def test_delete_entry_logs_the_reason(store: MemoryStore) -> None:
    store.overwrite(
        "L3", "scope", "## Courses\n- Calculus I <!--m_c1-->\n- Chemistry <!--m_c2-->\n"
    )
    store.delete_entry("L3", "scope", "m_c1", "stale")
    assert [e.id for _, e in store.read("L3", "scope").entries()] == ["c2"]
    (line,) = (store.root / "deletions.jsonl").read_text().splitlines()
    logged = json.loads(line)
    assert logged["entry_id"] == "m_c1" and logged["reason"] == "stale"
    assert logged["text"] == "Calculus I" and logged["document"] == "L3/scope.md"
    with pytest.raises(KeyError):
        store.delete_entry("L3", "scope", "m_c1", "stale")


def test_overwrite_validates_and_canonicalises(store: MemoryStore) -> None:
    with pytest.raises(DocumentError, match="line 2"):
        store.overwrite("L3", "profile", "## S\nloose prose\n")
    assert not store.path("L3", "profile").exists()
    store.overwrite("L3", "profile", "## S\n- Likes graphs [^m_x]\n\n[^m_x]: t_1, t_2\n")
    assert store.read_text("L3", "profile") == (
        "## S\n- Likes graphs [^1][^2] <!--m_x-->\n\n---\n\n[^1]: t_1\n[^2]: t_2\n"
    )


def test_legacy_document_is_migrated_on_the_next_save(store: MemoryStore) -> None:
    path = store.path("L2", "chat")
    path.parent.mkdir(parents=True)
    path.write_text("## S\n- Old [^m_o]\n\n[^m_o]: t_1\n")
    store.emit(make_record("t_2"))
    store.apply_ops("L2", "chat", [{"op": "add", "section": "S", "text": "New", "refs": ["t_2"]}])
    assert path.read_text() == (
        "## S\n- Old [^1] <!--m_o-->\n- New [^2] <!--m_"
        + store.read("L2", "chat").entries()[1][1].id
        + "-->\n\n---\n\n[^1]: t_1\n[^2]: t_2\n"
    )


def test_system_prompt_block_puts_preferences_first_and_caps(store: MemoryStore) -> None:
    store.write_preference("add", "Use metric units", trace_id="t_1")
    lines = "".join(f"- Fact number {i} <!--m_f{i}-->\n" for i in range(200))
    store.overwrite("L3", "profile", "## Facts\n" + lines)
    block = store.system_prompt_block(limit_chars=500)
    assert len(block) <= 500
    assert block.index("Use metric units") < block.index("Fact number 0")
    assert "more remembered items not shown" in block
    assert "m_f" not in block and "[^" not in block


def test_read_l3_concat_shows_every_nonempty_document(store: MemoryStore) -> None:
    store.write_preference("add", "Short answers", trace_id="t_1")
    text = store.read_l3_concat()
    assert text.startswith("# L3/preferences.md\n\n## Preferences\n- Short answers [^1] <!--m_")
    assert "recent" not in text


def test_forget_all_and_export(store: MemoryStore, tmp_path: Path) -> None:
    store.emit(make_record("t_1"))
    store.write_preference("add", "Short answers", trace_id="t_1")
    archive = store.export_zip(tmp_path)
    with zipfile.ZipFile(archive) as zipped:
        names = zipped.namelist()
    assert "memory/L3/preferences.md" in names
    assert any(name.startswith("memory/trace/chat/") for name in names)
    assert not any(name.startswith(("memory/locks", "memory/runs")) for name in names)
    store.forget_all()
    assert store.traces() == [] and store.read_l3_concat() == EMPTY_MEMORY
    assert store.emit(make_record("t_1")) is True  # forgotten ids may come back


def test_seen_traces_are_remembered_per_document(store: MemoryStore) -> None:
    store.mark_seen("L2", "chat", ["t_1", "t_2"])
    store.mark_seen("L2", "chat", ["t_2", "t_3"])
    assert MemoryStore(store.home).seen_traces("L2", "chat") == {"t_1", "t_2", "t_3"}
    assert store.seen_traces("L3", "profile") == set()


def test_dedupe_reads_only_what_was_appended(store: MemoryStore) -> None:
    # Not a timing: the id index resumes at the offset it reached, it does not reread the day.
    store.emit(make_record("t_1", started_at=time.time()))
    store.emit(make_record("t_2", started_at=time.time()))
    ((path, state),) = store._traces._files.items()
    first_line = len(path.read_bytes().splitlines(keepends=True)[0])
    assert (state.offset, state.ids) == (first_line, {"t_1"})
    assert store.known_trace_ids() == {"t_1", "t_2"}
    assert state.offset == path.stat().st_size
