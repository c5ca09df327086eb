"""The panel's Regenerate, Delete (with JupyterLab's confirmation dialog) and Markdown with LaTeX in
an ask_user card's options, in real JupyterLab and Chromium; one JupyterLab for the module.
Screenshots: tests/ui/artifacts/panel-edits-*.png."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.ui.test_lab import (
    ARTIFACTS,
    lab_page,
    lab_server,
    needs_chromium,
    open_notebook,
    write_notebook,
)
from tests.ui.test_sidebar import ask_in_panel, open_tutor

pytestmark = pytest.mark.ui

OPTIONS = {
    "title": "Which matrix is **singular**?",
    "mode": "single",
    "options": [
        {"id": "zero", "label": "$\\det A = 0$", "description": "`A` has no inverse"},
        {"id": "one", "label": "$\\det A = 1$"},
    ],
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("panel-edits")


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
def lab(folder: Path, fake_llm: FakeLLMServer) -> Iterator[str]:
    with lab_server(folder, fake_llm) as url:
        yield url


def sent_text(fake_llm: FakeLLMServer, index: int) -> str:
    return json.dumps(fake_llm.requests[index].body["messages"])


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


@needs_chromium
def test_latex_options_regenerate_and_delete_in_the_panel(
    lab: str, fake_llm: FakeLLMServer, folder: Path
) -> None:
    fake_llm.extend(
        [
            Reply(text="First, a check.", tool_calls=[ToolCallSpec("ask_user", OPTIONS, id="c1")]),
            Reply(text="Old answer: rank counts pivots."),
            Reply(text="New answer: the rank is the number of pivots."),
        ]
    )
    write_notebook(folder / "edits.ipynb", "x = 1")
    with lab_page("panel-edits") as page:
        open_notebook(page, lab, "edits.ipynb")
        open_tutor(page)
        ask_in_panel(page, "What is rank?")

        # The option's LaTeX is typeset and its backticks are code, by the panel's renderer.
        card = page.locator("#deeptutor-panel .jp-DeepTutorAsk")
        card.locator(".jp-DeepTutorAsk-label mjx-container").first.wait_for()
        card.locator(".jp-DeepTutorAsk-optionDescription code", has_text="A").wait_for()
        title_bold = card.locator(".jp-DeepTutorAsk-title strong").inner_text()
        shown_options = card.locator(".jp-DeepTutorAsk-options").inner_text()
        shot(page, "panel-edits-latex-options")
        card.locator(".jp-DeepTutorAsk-option").first.click()
        card.locator("button", has_text="Submit").click()
        turn = page.locator(".jp-DeepTutorChat-turn[data-status='done']")
        turn.get_by_text("Old answer").first.wait_for(timeout=60000)

        # Regenerate: the new answer takes the old one's place; only one turn shows.
        page.locator(".jp-DeepTutorChat-regenerate").click()
        page.get_by_text("New answer: the rank").first.wait_for(timeout=60000)
        page.locator(".jp-DeepTutorChat-turn[data-status='done']").wait_for()
        turns = page.locator(".jp-DeepTutorChat-turn")
        regenerated = (turns.count(), turns.first.inner_text())
        shot(page, "panel-edits-regenerated")

        # Delete asks first in JupyterLab's dialog; Cancel keeps the conversation.
        page.locator(".jp-DeepTutorChat-delete").click()
        dialog = page.locator(".jp-Dialog")
        dialog.wait_for()
        asked = dialog.inner_text()
        shot(page, "panel-edits-delete-dialog")
        dialog.locator("button", has_text="Cancel").click()
        dialog.wait_for(state="detached")
        kept = page.locator(".jp-DeepTutorChat-turn").count()
        page.locator(".jp-DeepTutorChat-delete").click()
        page.locator(".jp-Dialog button.jp-mod-warn", has_text="Delete").click()
        page.locator(".jp-DeepTutorChat-turn").first.wait_for(state="detached")
        chooser = page.locator(".jp-DeepTutorChat-conversations option").all_inner_texts()
        shot(page, "panel-edits-deleted")

    assert title_bold == "singular"
    assert "$" not in shown_options and "`" not in shown_options  # no raw LaTeX or backticks
    assert regenerated[0] == 1
    assert "What is rank?" in regenerated[1] and "New answer" in regenerated[1]
    assert "Old answer" not in regenerated[1]
    # The regenerated turn was asked the same question without the old answer or its question.
    assert "What is rank?" in sent_text(fake_llm, 2)
    assert "Old answer" not in sent_text(fake_llm, 2) and "singular" not in sent_text(fake_llm, 2)
    assert "Delete this conversation?" in asked and "What is rank?" in asked
    assert kept == 1
    assert chooser == ["New conversation"]
