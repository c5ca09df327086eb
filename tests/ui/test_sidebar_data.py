"""The Memory and Knowledge tabs in real JupyterLab and Debian's Chromium: a folder added from
the file browser's context menu is indexed on the server and listed; memory entries and documents
are deleted through JupyterLab's dialogs; a consolidation (the model is the fake LLM server) is
previewed, then applied exactly as shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.memory import MemoryStore
from deeptutor_jupyter.memory.trace import TraceRecord
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.ui.test_lab import ARTIFACTS, TOKEN, lab_page, needs_chromium
from tests.ui.test_sidebar import open_tutor

pytestmark = pytest.mark.ui

PROFILE = (
    "# Profile\n\n## Style\n\n"
    "- Likes worked examples. [^1] <!--m_aaaa1-->\n"
    "- Prefers short answers. [^1] <!--m_bbbb2-->\n\n"
    "---\n\n[^1]: t_1\n"
)


def open_lab(page: Any, lab: str) -> None:
    page.goto(f"{lab}/lab?token={TOKEN}")
    page.wait_for_function("() => window.jupyterapp", timeout=60000)
    page.locator(".jp-DirListing-item").first.wait_for(timeout=60000)


def trace(trace_id: str, question: str) -> TraceRecord:
    return TraceRecord(
        trace_id=trace_id, session_id="nb-a", turn_id=f"turn-{trace_id}", model="m",
        started_at=1780000000.0, finished_at=1780000004.0, question=question,
        answer_summary="…",
    )  # fmt: skip


@needs_chromium
def test_a_folder_is_added_to_a_knowledge_base_from_the_file_browser(
    lab: str, tmp_path: Path
) -> None:
    course = tmp_path / "Week 1"
    course.mkdir()
    # Enough files that indexing takes a moment, so the progress has something to show.
    for n in range(150):
        (course / f"lesson{n:03}.md").write_text(f"# Lesson {n}\n\nThe rank counts pivots {n}.\n")
    with lab_page("sidebar-kb-add") as page:
        open_lab(page, lab)
        folder = page.locator(".jp-DirListing-item[data-isdir='true']", has_text="Week 1")
        folder.click()
        folder.click(button="right")
        page.locator(".lm-Menu-item", has_text="Add to knowledge base").click()
        dialog = page.locator(".jp-Dialog")
        name = dialog.locator("input")
        default = name.input_value()
        dialog.locator("button", has_text="Add").click()
        # The panel opens on the Knowledge tab; the job is shown until the index is listed.
        page.locator("#deeptutor-panel").wait_for(state="visible")
        row = page.locator(".jp-DeepTutorKnowledge-kb[data-kb='Week-1']")
        row.wait_for()
        first_text = row.inner_text()
        page.screenshot(path=str(ARTIFACTS / "sidebar-kb-progress.png"))
        row.locator(".jp-DeepTutorKnowledge-meta").wait_for(timeout=120000)
        row.get_by_text("Indexed Week 1").wait_for()
        done_text = row.inner_text()
    assert default == "Week-1"  # the folder's name, made a valid name
    assert "Week-1" in first_text and ("Indexing Week 1" in first_text or "Indexed" in first_text)
    assert "150 files" in done_text
    assert "150 added" in done_text
    assert "from Week 1" in done_text  # the folder, relative to the server root
    kbs = json.loads((tmp_path / "home" / "kb" / "Week-1" / "manifest.json").read_text())
    assert kbs["n_files"] == 150  # the file table's pieces hold 150 files
    assert sum(count for _, _, count in kbs["shards"].values()) == 150


@needs_chromium
def test_a_bad_knowledge_base_name_is_refused_in_a_dialog(lab: str, tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# A\n")
    with lab_page("sidebar-kb-bad-name") as page:
        open_lab(page, lab)
        folder = page.locator(".jp-DirListing-item[data-isdir='true']", has_text="notes")
        folder.click()
        folder.click(button="right")
        page.locator(".lm-Menu-item", has_text="Add to knowledge base").click()
        page.locator(".jp-Dialog input").fill("no spaces allowed")
        page.locator(".jp-Dialog button", has_text="Add").click()
        error = page.locator(".jp-Dialog", has_text="Not a knowledge base name")
        error.wait_for()
        text = error.inner_text()
    assert "use 1 to 64 letters" in text
    assert not (tmp_path / "home" / "kb").exists()


def seed_memory(home: Path) -> MemoryStore:
    memory = MemoryStore(home)
    memory.emit(trace("t_1", "Show me an example of a matrix product."))
    memory.emit(trace("t_2", "Can you go slower with proofs?"))
    memory.overwrite("L3", "profile", PROFILE)
    memory.overwrite("L2", "quiz", "# Quiz\n\n## Mistakes\n\n- Mixes rows and columns.\n")
    return memory


def memory_doc(page: Any, name: str) -> Any:
    doc = page.locator(f".jp-DeepTutorMemory-doc[data-doc='{name}']")
    doc.wait_for()
    return doc


@needs_chromium
def test_memory_entries_and_documents_are_deleted_after_a_confirmation(
    lab: str, tmp_path: Path
) -> None:
    memory = seed_memory(tmp_path / "home")
    with lab_page("sidebar-memory-delete") as page:
        open_lab(page, lab)
        open_tutor(page)
        page.locator(".jp-DeepTutorPanel-tab", has_text="Memory").click()
        profile = memory_doc(page, "L3/profile.md")
        entry = profile.locator(".jp-DeepTutorMemory-entry[data-entry-id='m_aaaa1']")
        provenance = entry.locator(".jp-DeepTutorMemory-refs").inner_text()
        # Cancel first: nothing goes.
        entry.locator("button").click()
        page.locator(".jp-Dialog button", has_text="Cancel").click()
        page.locator(".jp-Dialog").wait_for(state="detached")
        after_cancel = memory.read_text("L3", "profile")
        entry.locator("button").click()
        dialog = page.locator(".jp-Dialog")
        dialog.locator("select").select_option("contradicted")
        page.screenshot(path=str(ARTIFACTS / "sidebar-memory-delete-dialog.png"))
        dialog.locator("button", has_text="Delete").click()
        entry.wait_for(state="detached")

        quiz = memory_doc(page, "L2/quiz.md")
        quiz.locator("button", has_text="Delete document").click()
        page.locator(".jp-Dialog", has_text="Delete Notes from quizzes?").locator(
            "button", has_text="Delete"
        ).click()
        quiz.wait_for(state="detached")
        remaining = profile.locator(".jp-DeepTutorMemory-entry").all_inner_texts()
    assert provenance == "from “Show me an example of a matrix product.”"
    assert "Likes worked examples." in after_cancel
    profile_text = memory.read_text("L3", "profile")
    assert "Likes worked examples." not in profile_text
    assert "Prefers short answers." in profile_text
    assert len(remaining) == 1 and "Prefers short answers." in remaining[0]
    assert not memory.path("L2", "quiz").exists()
    log = (tmp_path / "home" / "memory" / "deletions.jsonl").read_text().splitlines()
    reasons = [(json.loads(line)["entry_id"], json.loads(line)["reason"]) for line in log]
    assert reasons[0] == ("m_aaaa1", "contradicted")
    assert len(reasons) == 2  # and the quiz document's one entry


@needs_chromium
def test_a_consolidation_is_previewed_then_applied_exactly(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    memory = seed_memory(tmp_path / "home")
    ops = [
        {"op": "add", "section": "Pace", "text": "Wants proofs step by step.", "refs": ["t_2"]},
        {"op": "delete", "id": "m_bbbb2", "reason": "stale"},
    ]
    fake_llm.extend([Reply(text=json.dumps({"ops": ops}))])
    with lab_page("sidebar-memory-consolidate") as page:
        open_lab(page, lab)
        open_tutor(page)
        page.locator(".jp-DeepTutorPanel-tab", has_text="Memory").click()
        profile = memory_doc(page, "L3/profile.md")
        profile.locator("button", has_text="Consolidate").click()
        preview = profile.locator(".jp-DeepTutorPreview")
        preview.wait_for(timeout=60000)
        shown = preview.inner_text()
        added = preview.locator(".jp-DeepTutorPreview-change.jp-mod-add").all_inner_texts()
        forgotten = preview.locator(".jp-DeepTutorPreview-change.jp-mod-delete").all_inner_texts()
        unchanged_while_shown = memory.read_text("L3", "profile")
        page.screenshot(path=str(ARTIFACTS / "sidebar-memory-preview.png"))
        calls = len(fake_llm.requests)
        preview.locator("button", has_text="Apply").click()
        profile.locator(".jp-DeepTutorMemory-notice").wait_for()
        notice = profile.locator(".jp-DeepTutorMemory-notice").inner_text()
        entries = profile.locator(".jp-DeepTutorMemory-entryText").all_inner_texts()
    assert "Wants proofs step by step." not in unchanged_while_shown  # a preview writes nothing
    assert added == [
        "New in Pace: Wants proofs step by step. from “Can you go slower with proofs?”"
    ]
    assert forgotten == ["Forgotten (stale): Prefers short answers."]
    assert "t_2 Can you go slower with proofs?" in shown
    assert calls == 1 and len(fake_llm.requests) == 1  # Apply did not ask the model again
    assert notice == "Applied 2 changes to About you."
    text = memory.read_text("L3", "profile")
    assert "Wants proofs step by step." in text and "Prefers short answers." not in text
    assert entries == ["Likes worked examples.", "Wants proofs step by step."]


@needs_chromium
def test_a_stale_preview_is_refused_and_stays_until_discarded(lab: str, tmp_path: Path) -> None:
    memory = seed_memory(tmp_path / "home")
    memory.overwrite(
        "L3", "profile", PROFILE.replace("Prefers short answers.", "likes worked examples!")
    )
    with lab_page("sidebar-memory-stale") as page:
        open_lab(page, lab)
        open_tutor(page)
        page.locator(".jp-DeepTutorPanel-tab", has_text="Memory").click()
        profile = memory_doc(page, "L3/profile.md")
        profile.locator(".jp-DeepTutorMemory-mode").select_option("merge")  # needs no model
        profile.locator("button", has_text="Consolidate").click()
        preview = profile.locator(".jp-DeepTutorPreview")
        preview.wait_for()
        # Someone edits the document (a cell, another tab) before Apply.
        memory.overwrite("L3", "profile", "# Profile\n\n## Style\n\n- Edited meanwhile.\n")
        edited = memory.read_text("L3", "profile")
        preview.locator("button", has_text="Apply").click()
        error = preview.locator(".jp-DeepTutorChat-error")
        error.wait_for()
        refusal = error.inner_text()
        # The document as it now is, under the preview that was not written.
        profile.locator(".jp-DeepTutorMemory-entry", has_text="Edited meanwhile.").wait_for()
        page.screenshot(path=str(ARTIFACTS / "sidebar-memory-stale-refused.png"))
        apply_disabled = preview.locator("button", has_text="Apply").is_disabled()
        still_shown = preview.locator(".jp-DeepTutorPreview-change").all_inner_texts()
        preview.locator("button", has_text="Discard").click()
        preview.wait_for(state="detached")
    assert "changed since the preview was made; nothing was written" in refusal
    assert apply_disabled  # Apply would be refused again: only Discard is offered
    assert still_shown == ["Forgotten (superseded): likes worked examples!"]
    assert memory.read_text("L3", "profile") == edited
