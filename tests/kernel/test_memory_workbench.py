"""The memory workbench and the forget card, driven from code against a real MemoryStore."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import pytest

from deeptutor_jupyter.kernel.widgets import memory_workbench
from deeptutor_jupyter.kernel.widgets.forget_card import ForgetCard
from deeptutor_jupyter.kernel.widgets.memory_workbench import EntryRow, MemoryWorkbench
from deeptutor_jupyter.memory import MemoryStore, TraceRecord
from deeptutor_jupyter.providers import ChatModel, make_model
from deeptutor_jupyter.testing import FakeLLMServer, Reply

DAY = 1_700_000_000.0  # 2023-11-14 UTC
DUPLICATES = (
    "## Topics\n- Derivatives [^1]\n- Limits [^1]\n- limits! [^2]\n\n[^1]: t_1\n[^2]: t_2\n"
)
HOSTILE = "Likes <img src=x onerror=alert(1)> & proofs"


def record(trace_id: str, question: str, surface: str = "chat", at: float = DAY) -> TraceRecord:
    return TraceRecord(
        trace_id=trace_id,
        surface=surface,
        session_id="nb-1",
        turn_id=f"turn-{trace_id}",
        model="fake",
        started_at=at,
        finished_at=at + 1,
        question=question,
        answer_summary="an answer",
    )


def add(section: str, text: str, *refs: str) -> dict[str, Any]:
    return {"op": "add", "section": section, "text": text, "refs": list(refs)}


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    store = MemoryStore(tmp_path / "home")
    store.emit(record("t_1", "What is a derivative of x**2?"))
    store.emit(record("t_2", "Prove that the square root of 2 is irrational", at=DAY + 60))
    store.emit(record("t_quiz", "Quiz on limits", surface="quiz"))
    preview = store.apply_ops(
        "L3",
        "profile",
        [add("Level", "Studies calculus", "t_1"), add("Style", HOSTILE, "t_1", "t_2")],
    )
    assert not preview.rejected
    store.apply_ops("L2", "chat", [add("Topics", "Derivatives", "t_1")])
    return store


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
async def model(server: FakeLLMServer) -> AsyncIterator[ChatModel]:
    chat = make_model(provider="custom", model="fake-model", base_url=server.url, max_retries=0)
    yield chat
    await chat.aclose()


def walk(widget: Any) -> Iterator[Any]:
    yield widget
    for child in getattr(widget, "children", ()):
        yield from walk(child)


def html_of(widget: Any) -> str:
    return "\n".join(w.value for w in walk(widget) if isinstance(w, widgets.HTML))


def markdown_of(bench: MemoryWorkbench) -> str:
    text: str = bench.document.outputs[0]["data"]["text/markdown"]
    return text


def pick(bench: MemoryWorkbench, layer: str, key: str) -> None:
    bench.picker.value = (layer, key)


def row(bench: MemoryWorkbench, text: str) -> EntryRow:
    return next(r for r in bench.entry_rows if r.entry.text == text)


def with_class(widget: Any, name: str) -> list[Any]:
    return [w for w in walk(widget) if name in getattr(w, "_dom_classes", ())]


# reading --------------------------------------------------------------------------------------


def test_picker_lists_l3_then_existing_l2_documents_with_counts(store: MemoryStore) -> None:
    bench = MemoryWorkbench(store)
    assert [value for _, value in bench.picker.options] == [
        ("L3", "recent"),
        ("L3", "profile"),
        ("L3", "scope"),
        ("L3", "preferences"),
        ("L2", "chat"),
    ]
    labels = dict((value, label) for label, value in bench.picker.options)
    assert labels[("L3", "profile")] == "About you · 2 entries"
    assert labels[("L2", "chat")] == "Notes from chats · 1 entry"
    assert with_class(bench, "dt-memory") == [bench]
    assert len(with_class(bench, "dt-memory-diff")) == 1


def test_document_renders_with_footnotes_and_each_row_with_provenance(store: MemoryStore) -> None:
    bench = MemoryWorkbench(store)
    pick(bench, "L3", "profile")
    markdown = markdown_of(bench)
    assert "- Studies calculus <sup>[1]</sup>" in markdown
    assert "1. from trace t_1 on 2023-11-14: What is a derivative" in markdown
    assert "2. from trace t_2 on 2023-11-14: Prove that" in markdown
    assert "[^" not in markdown and "<!--" not in markdown
    assert len(with_class(bench, "dt-memory-entry")) == 2
    calculus = row(bench, "Studies calculus")
    assert "from trace t_1 on 2023-11-14: What is a derivative of x**2?" in calculus.text.value
    proofs = row(bench, HOSTILE)
    assert "from trace t_2 on 2023-11-14: Prove that the square root" in proofs.text.value


def test_learner_and_model_text_is_escaped(store: MemoryStore) -> None:
    bench = MemoryWorkbench(store)
    pick(bench, "L3", "profile")
    assert "<img" not in markdown_of(bench) and "&lt;img src=x" in markdown_of(bench)
    assert "<img" not in html_of(bench)
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; proofs" in row(bench, HOSTILE).text.value


def test_unknown_trace_is_shown_by_its_id(store: MemoryStore) -> None:
    store.overwrite("L3", "scope", "## Scope\n- Linear algebra [^1]\n\n[^1]: t_gone\n")
    bench = MemoryWorkbench(store)
    pick(bench, "L3", "scope")
    assert bench.entry_rows[0].text.value.endswith(
        '<div style="font-size:85%;opacity:0.75">from trace t_gone</div>'
    )


def test_empty_document_says_so(store: MemoryStore) -> None:
    bench = MemoryWorkbench(store)
    assert bench.selected == ("L3", "recent")
    assert "Nothing is remembered here yet" in markdown_of(bench)
    assert bench.entry_rows == []


# editing --------------------------------------------------------------------------------------


def test_edit_through_the_row_writes_a_validated_edit(store: MemoryStore) -> None:
    bench = MemoryWorkbench(store)
    pick(bench, "L3", "profile")
    target = row(bench, "Studies calculus")
    target.edit_button.click()
    assert target.edit_text.value == "Studies calculus"
    target.edit_text.value = "Studies multivariable calculus"
    target.save_button.click()
    text = store.read_text("L3", "profile")
    assert f"- Studies multivariable calculus [^1] <!--m_{target.entry.id}-->" in text
    assert "Saved About you." in bench.status.value
    assert "Studies multivariable calculus" in markdown_of(bench)


def test_invalid_edit_shows_the_reason_and_leaves_the_file(store: MemoryStore) -> None:
    bench = MemoryWorkbench(store)
    pick(bench, "L3", "profile")
    before = store.path("L3", "profile").read_bytes()
    target = row(bench, "Studies calculus")
    target.edit_button.click()
    target.edit_text.value = "x" * 300
    target.save_button.click()
    assert "Not saved: edit.text: String should have at most 240 characters" in (
        target.status.value
    )
    target.edit_text.value = "Studies calculus [^3]"
    target.save_button.click()
    assert "Not saved: text must be one line without &#x27;[^&#x27;" in target.status.value
    assert store.path("L3", "profile").read_bytes() == before


def test_an_entry_without_citations_is_edited_in_raw(store: MemoryStore) -> None:
    store.overwrite("L3", "scope", "## Scope\n- Linear algebra\n")
    bench = MemoryWorkbench(store)
    pick(bench, "L3", "scope")
    target = bench.entry_rows[0]
    assert "no trace cited" in target.text.value
    target.edit_button.click()
    target.edit_text.value = "Linear algebra and geometry"
    target.save_button.click()
    assert "cites no trace" in target.status.value and "Raw" in target.status.value
    assert "geometry" not in store.read_text("L3", "scope")


def test_delete_needs_a_reason_and_is_logged(store: MemoryStore) -> None:
    bench = MemoryWorkbench(store)
    pick(bench, "L3", "profile")
    target = row(bench, "Studies calculus")
    assert target.delete_button.disabled
    assert target.reason.label == "reason…"  # the placeholder shows; the dropdown is not blank
    target.delete_button.click()  # no reason yet: nothing happens
    assert "Studies calculus" in store.read_text("L3", "profile")

    target.reason.value = "stale"
    assert not target.delete_button.disabled
    target.delete_button.click()
    assert "Studies calculus" not in store.read_text("L3", "profile")
    log = [json.loads(line) for line in (store.root / "deletions.jsonl").read_text().splitlines()]
    assert log[0]["entry_id"] == f"m_{target.entry.id}" and log[0]["reason"] == "stale"
    assert log[0]["document"] == "L3/profile.md"
    assert [r.entry.text for r in bench.entry_rows] == [HOSTILE]
    assert bench.picker.label == "About you · 1 entry"


def test_raw_overwrite_saves_canonical_text(store: MemoryStore) -> None:
    bench = MemoryWorkbench(store)
    pick(bench, "L2", "chat")
    assert bench.raw_box.layout.display == "none"
    bench.raw_toggle.value = True
    assert bench.raw_box.layout.display is None
    assert bench.raw_text.value == store.read_text("L2", "chat")
    bench.raw_text.value = "## Topics\n- Derivatives [^a]\n* Integrals\n\n[^a]: t_1\n"
    bench.raw_save.click()
    text = store.read_text("L2", "chat")
    assert "- Derivatives [^1] <!--m_" in text and "- Integrals <!--m_h" in text
    assert "Saved Notes from chats." in bench.status.value
    assert [r.entry.text for r in bench.entry_rows] == ["Derivatives", "Integrals"]


def test_raw_overwrite_that_does_not_parse_writes_nothing(store: MemoryStore) -> None:
    bench = MemoryWorkbench(store)
    pick(bench, "L2", "chat")
    before = store.path("L2", "chat").read_bytes()
    bench.raw_toggle.value = True
    bench.raw_text.value = "## Topics\n- Derivatives [^9]\nsome <b>stray</b> prose\n"
    bench.raw_save.click()
    assert "the document does not parse" in bench.status.value
    assert "footnote [^9] has no definition" in bench.status.value
    assert "&lt;b&gt;stray" in bench.status.value and "<b>stray" not in bench.status.value
    assert store.path("L2", "chat").read_bytes() == before


# consolidation --------------------------------------------------------------------------------


async def test_merge_previews_a_diff_then_applies_without_a_model(store: MemoryStore) -> None:
    store.overwrite("L2", "chat", DUPLICATES)
    before = store.read_text("L2", "chat")
    bench = MemoryWorkbench(store)
    pick(bench, "L2", "chat")
    bench.mode.value = "merge"
    assert bench.apply_button.disabled
    bench.preview_button.click()
    assert bench.task is not None
    await bench.task

    assert store.read_text("L2", "chat") == before  # a preview writes nothing
    removed = '<span style="color:var(--jp-error-color1, #c62828)">-- limits! [^2]'
    assert removed in bench.diff.value and "+- Limits [^1][^2]" in bench.diff.value
    assert "2 ops proposed, 0 rejected" in bench.consolidation_status.value
    assert not bench.apply_button.disabled

    bench.apply_button.click()
    after = store.read("L2", "chat")
    assert [(e.text, e.refs) for _, e in after.entries()] == [
        ("Derivatives", ["t_1"]),
        ("Limits", ["t_1", "t_2"]),
    ]
    log = (store.root / "deletions.jsonl").read_text()
    assert '"reason": "superseded"' in log
    assert "Applied 2 ops to Notes from chats." in bench.consolidation_status.value
    assert bench.diff.value == "" and bench.apply_button.disabled


async def test_update_preview_shows_rejections_and_apply_writes_what_was_previewed(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    ops = [
        add("Topics", "Irrationality proofs", "t_2"),
        add("Topics", "Invented <script>", "t_999"),
    ]
    server.add(Reply(text=json.dumps({"ops": ops})))
    bench = MemoryWorkbench(store, make_model=lambda: model)
    pick(bench, "L3", "profile")
    before = store.path("L3", "profile").read_bytes()
    bench.preview_button.click()
    task = bench.task
    assert task is not None
    assert bench.preview_button.disabled and bench.picker.disabled
    assert "running…" in bench.consolidation_status.value
    await task

    assert not bench.preview_button.disabled
    assert store.path("L3", "profile").read_bytes() == before
    assert store.seen_traces("L3", "profile") == set()
    assert "+- Irrationality proofs" in bench.diff.value
    assert "unknown reference &#x27;t_999&#x27;" in bench.rejected.value
    assert "<script>" not in bench.rejected.value
    assert "1 op proposed, 1 rejected, 3 traces read." in bench.consolidation_status.value

    bench.apply_button.click()
    assert len(server.requests) == 1  # Apply wrote the preview; it did not ask again
    assert "Irrationality proofs" in store.read_text("L3", "profile")
    assert "Invented" not in store.read_text("L3", "profile")
    assert store.seen_traces("L3", "profile") == {"t_1", "t_2", "t_quiz"}
    assert "Irrationality proofs" in [r.entry.text for r in bench.entry_rows]


async def test_apply_refuses_a_preview_of_a_document_that_changed(store: MemoryStore) -> None:
    store.overwrite("L2", "chat", "## T\n- A [^1]\n- a [^2]\n\n[^1]: t_1\n[^2]: t_2\n")
    bench = MemoryWorkbench(store)
    pick(bench, "L2", "chat")
    bench.mode.value = "merge"
    bench.preview_button.click()
    assert bench.task is not None
    await bench.task
    store.apply_ops("L2", "chat", [add("T", "B", "t_1")])
    changed = store.read_text("L2", "chat")
    bench.apply_button.click()
    assert "changed since the preview" in bench.consolidation_status.value
    assert store.read_text("L2", "chat") == changed


async def test_a_running_consolidation_makes_preview_and_apply_busy(store: MemoryStore) -> None:
    store.overwrite("L2", "chat", "## T\n- A [^1]\n- a [^2]\n\n[^1]: t_1\n[^2]: t_2\n")
    bench = MemoryWorkbench(store)
    pick(bench, "L2", "chat")
    bench.mode.value = "merge"
    with store.run_lock("L2", "chat"):
        bench.preview_button.click()
        assert bench.task is not None
        await bench.task
        assert "Another consolidation of this document is running." in (
            bench.consolidation_status.value
        )
        assert bench.preview is None and bench.apply_button.disabled
    bench.preview_button.click()
    assert bench.task is not None
    await bench.task
    with store.run_lock("L2", "chat"):
        bench.apply_button.click()
    assert "Another consolidation of this document is running." in (
        bench.consolidation_status.value
    )
    assert "- a [^" in store.read_text("L2", "chat")


async def test_modes_that_need_a_model_say_so(store: MemoryStore) -> None:
    bench = MemoryWorkbench(store)
    pick(bench, "L3", "profile")
    bench.preview_button.click()
    assert bench.task is None
    assert "No model is configured" in bench.consolidation_status.value

    def broken() -> ChatModel:
        raise ValueError("OpenAI needs an API key")

    bench = MemoryWorkbench(store, make_model=broken)
    pick(bench, "L3", "profile")
    bench.mode.value = "audit"
    bench.preview_button.click()
    assert bench.task is None
    assert "Could not create the model: ValueError: OpenAI needs an API key" in (
        bench.consolidation_status.value
    )


async def test_a_provider_error_is_shown_in_the_widget(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    server.add(Reply(status=500, error="boom"))
    bench = MemoryWorkbench(store, make_model=lambda: model)
    pick(bench, "L2", "chat")
    bench.preview_button.click()
    assert bench.task is not None
    await bench.task
    assert "Consolidation failed:" in bench.consolidation_status.value
    assert not bench.preview_button.disabled and bench.apply_button.disabled


def test_preferences_are_never_consolidated(store: MemoryStore) -> None:
    store.write_preference("add", "Answer in Chinese", trace_id="t_1")
    bench = MemoryWorkbench(store)
    assert bench.consolidation_note.layout.display == "none"
    pick(bench, "L3", "preferences")
    assert bench.preview_button.disabled and bench.apply_button.disabled and bench.mode.disabled
    assert bench.consolidation_note.layout.display is None
    assert "preferences are never auto-consolidated" in bench.consolidation_note.value
    bench.preview_button.click()
    assert bench.task is None
    pick(bench, "L3", "profile")
    assert not bench.preview_button.disabled


def test_chinese_strings(store: MemoryStore) -> None:
    bench = MemoryWorkbench(store, language="zh")
    pick(bench, "L3", "profile")
    assert bench.preview_button.description == "预览"
    assert "来自记录 t_1（2023-11-14）" in row(bench, "Studies calculus").text.value
    assert ForgetCard(store, language="zh").delete_button.description == "全部删除"


# forgetting -----------------------------------------------------------------------------------


def test_forget_card_counts_and_gates_the_delete(store: MemoryStore) -> None:
    card = ForgetCard(store)
    assert card._dom_classes == ("dt-forget",)
    assert "3 remembered turns in 2 trace files and 2 documents" in card.explanation.value
    assert card.delete_button.disabled and card.delete_button.button_style == "danger"
    card.delete_button.click()  # unchecked: ignored
    assert store.traces() and card.state == "open"
    card.confirm.value = True
    assert not card.delete_button.disabled
    card.confirm.value = False
    assert card.delete_button.disabled


def test_forget_card_deletes_everything_and_leaves_a_receipt(store: MemoryStore) -> None:
    card = ForgetCard(store)
    card.confirm.value = True
    card.delete_button.click()
    assert card.state == "deleted"
    assert store.traces() == [] and store.known_trace_ids() == set()
    assert store.read_text("L3", "profile") == "" and not (store.root / "L2").exists()
    assert "Deleted 2 trace files and 2 documents at " in card.receipt.value
    assert card.delete_button.disabled and card.confirm.disabled and card.cancel_button.disabled


def test_forget_card_cancel_deletes_nothing(store: MemoryStore) -> None:
    card = ForgetCard(store)
    card.cancel_button.click()
    card.confirm.value = True
    card.delete_button.click()
    assert card.state == "cancelled" and "nothing was deleted" in card.receipt.value
    assert len(store.traces()) == 3


def test_no_event_loop_is_reported(store: MemoryStore) -> None:
    bench = MemoryWorkbench(store)
    pick(bench, "L2", "chat")
    bench.mode.value = "merge"
    bench.preview_button.click()
    assert bench.task is None and "running event loop" in bench.consolidation_status.value


async def test_a_click_on_another_thread_starts_the_preview_on_the_loop(
    store: MemoryStore,
) -> None:
    store.overwrite("L2", "chat", DUPLICATES)
    bench = MemoryWorkbench(store)
    pick(bench, "L2", "chat")
    bench.mode.value = "merge"
    await asyncio.to_thread(bench.preview_button.click)  # a kernel subshell thread
    for _ in range(100):
        if bench.task is not None:
            break
        await asyncio.sleep(0.01)
    assert bench.task is not None
    await bench.task
    assert "+- Limits [^1][^2]" in bench.diff.value


def test_long_documents_show_a_bounded_number_of_rows(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_workbench, "ROW_LIMIT", 1)
    bench = MemoryWorkbench(store)
    pick(bench, "L3", "profile")
    assert len(bench.entry_rows) == 1
    assert "Showing the first 1 of 2 entries; use Raw for the rest." in html_of(bench.rows)
    assert HOSTILE.split("<")[0] in markdown_of(bench)  # the Markdown view keeps everything


def test_an_entry_citing_two_traces_shows_both(store: MemoryStore) -> None:
    store.apply_ops("L3", "scope", [add("Scope", "Proofs about limits", "t_1", "t_2")])
    bench = MemoryWorkbench(store)
    pick(bench, "L3", "scope")
    markdown = markdown_of(bench)
    assert "- Proofs about limits <sup>[1]</sup><sup>[2]</sup>" in markdown
    assert "1. from trace t_1" in markdown and "2. from trace t_2" in markdown


async def test_the_diff_hides_entry_ids_and_apply_keeps_the_previewed_id(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    server.add(Reply(text=json.dumps({"ops": [add("Topics", "Irrationality proofs", "t_2")]})))
    bench = MemoryWorkbench(store, make_model=lambda: model)
    pick(bench, "L3", "profile")
    bench.preview_button.click()
    assert bench.task is not None
    await bench.task
    assert "<!--" not in bench.diff.value and "&lt;!--" not in bench.diff.value
    assert "+- Irrationality proofs [^2]</span>" in bench.diff.value
    assert bench.preview is not None
    previewed = next(op["id"] for op in bench.preview.result.ops_applied if op["op"] == "add")
    bench.apply_button.click()
    applied = next(e for _, e in store.read("L3", "profile").entries() if "Irrational" in e.text)
    assert f"m_{applied.id}" == previewed
    assert "Applied 1 op to About you." in bench.consolidation_status.value


# background consolidation: status and switch --------------------------------------------


def settings_of(home: Path, **env: str):  # type: ignore[no-untyped-def]
    from deeptutor_jupyter.config import resolve_settings

    environ = {"DEEPTUTOR_HOME": str(home), "DEEPTUTOR_PROVIDER": "ollama", **env}
    return lambda: resolve_settings(environ=environ)


def test_documents_and_settings_are_named_in_words_not_layers(store: MemoryStore):
    from deeptutor_jupyter.kernel.widgets.memory_workbench import doc_title

    assert [doc_title(("L3", k)) for k in ("recent", "profile", "scope", "preferences")] == [
        "Recent work",
        "About you",
        "What you are studying",
        "Your preferences",
    ]
    assert doc_title("L2/quiz.md", "zh") == "测验笔记" and doc_title(("L2", "lab")) == "Notes: lab"
    wb = MemoryWorkbench(store, settings=settings_of(store.home))
    shown = [wb.auto_toggle.description, wb.auto_status.value, wb.fallback_markdown()]
    shown += [label for label, _ in wb.picker.options]
    assert not [text for text in shown if re.search(r"\bL[23]\b", text)]


def test_the_workbench_says_background_consolidation_has_not_run_yet(store: MemoryStore):
    wb = MemoryWorkbench(store, settings=settings_of(store.home))
    assert wb.auto_toggle.value is True
    assert wb.auto_toggle.description == "Update the tutor's notes after every 5 new turns"
    assert wb.auto_toggle.layout.width == "auto"  # the default 300px cut the label off
    assert "has not run yet" in wb.auto_status.value and "ollama/" in wb.auto_status.value
    assert "Background consolidation: on." in wb.fallback_markdown()


def test_the_workbench_shows_the_last_run_and_a_failure_in_red(store: MemoryStore):
    from deeptutor_jupyter.memory.runs import DocumentRun, RunLog, RunRecord

    log = RunLog(store.root)
    done = DocumentRun("L2/chat.md", consumed=["t_1", "t_2"], ops=[{"op": "add", "id": "m_1"}])
    log.append(RunRecord(at=DAY, trigger="auto", model="ollama/llama3.1", documents=[done]))
    wb = MemoryWorkbench(store, settings=settings_of(store.home))
    text = wb.auto_status.value
    assert "Last ran 2023-11-1" in text and "ollama/llama3.1" in text
    assert "Notes from chats read 2 traces, 1 op applied" in text
    assert memory_workbench._ERROR not in text

    bad = DocumentRun("L3/profile.md", "failed", error="ProviderError: <b>429</b>", unseen=5)
    log.append(RunRecord(at=DAY + 60, trigger="auto", model="ollama/llama3.1", documents=[bad]))
    wb.refresh()
    text = wb.auto_status.value
    assert "About you failed (ProviderError: &lt;b&gt;429&lt;/b&gt;)" in text
    assert "retried" in text and memory_workbench._ERROR in text


def test_unticking_writes_settings_toml_and_says_when_the_environment_overrides(
    store: MemoryStore,
):
    wb = MemoryWorkbench(store, settings=settings_of(store.home))
    wb.auto_toggle.value = False
    toml = (store.home / "settings.toml").read_text()
    assert "auto_consolidate = false" in toml
    assert "Saved in settings.toml: background consolidation is off." in wb.auto_message.value
    assert wb.auto_status.value.count("Off:") == 1
    assert "Background consolidation: off." in wb.fallback_markdown()

    forced = MemoryWorkbench(
        store, settings=settings_of(store.home, DEEPTUTOR_AUTO_CONSOLIDATE="true")
    )
    assert forced.auto_toggle.value is True  # the environment wins over the file
    forced.auto_toggle.value = False
    assert "env DEEPTUTOR_AUTO_CONSOLIDATE overrides it" in forced.auto_message.value
    assert forced.auto_toggle.value is True  # shows what is in effect


def test_without_settings_the_background_section_is_hidden(store: MemoryStore):
    wb = MemoryWorkbench(store)
    background = wb.children[-1]
    assert background.layout.display == "none"
    assert "Background consolidation" not in wb.fallback_markdown()
