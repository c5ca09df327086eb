"""Context and quizzes in the Tutor panel, in real JupyterLab and Debian's Chromium: a cell and a
file dragged onto the chat go with the question and show as cards of what the model read, and a
make_quiz form in the panel is answered and graded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.ui.test_lab import lab_page, needs_chromium, open_notebook, write_notebook
from tests.ui.test_sidebar import open_tutor

pytestmark = pytest.mark.ui


def drag(page: Any, source: Any, target: Any) -> None:
    """A mouse drag as a learner does it: Lumino starts its drag after a few pixels."""
    box, goal = source.bounding_box(), target.bounding_box()
    assert box and goal
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 + 12, box["y"] + box["height"] / 2 + 12, steps=4)
    page.mouse.move(goal["x"] + goal["width"] / 2, goal["y"] + goal["height"] / 2, steps=12)
    page.mouse.up()


def run_all(page: Any) -> None:
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60000)


@needs_chromium
def test_a_cell_and_a_file_dragged_into_the_chat_are_cards_of_what_the_model_saw(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([Reply(text="The rank is 2: two pivots.")])
    (tmp_path / "notes.md").write_text("# Rank\nThe rank counts the pivots of a matrix.\n")
    write_notebook(tmp_path / "drag.ipynb", "A = [[1, 2], [2, 4]]", "rank_of_A = 2")
    with lab_page("sidebar-drag") as page:
        open_notebook(page, lab, "drag.ipynb")
        run_all(page)
        page.locator(".jp-Cell .jp-InputPrompt", has_text="[2]").wait_for()
        open_tutor(page)
        target = page.locator(".jp-DeepTutorChat-input textarea")
        # The second cell, by its prompt (where JupyterLab starts a cell drag).
        drag(page, page.locator(".jp-Cell .jp-InputPrompt", has_text="[2]"), target)
        chip = page.locator(".jp-DeepTutorChat-chip", has_text="Cell [2]")
        chip.wait_for()
        # A file from the file browser.
        page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:activate')")
        item = page.locator(".jp-DirListing-item", has_text="notes.md")
        item.wait_for()
        drag(page, item, target)
        page.locator(".jp-DeepTutorChat-chip", has_text="notes.md").wait_for()
        page.screenshot(path=str(Path(__file__).parent / "artifacts" / "sidebar-drag-chips.png"))
        target.fill("What is the rank of A?")
        page.locator(".jp-DeepTutorChat-input button", has_text="Ask").click()
        turn = page.locator(".jp-DeepTutorChat-turn[data-status='done']")
        turn.wait_for(timeout=60000)
        turn.get_by_text("two pivots").first.wait_for()
        chips_left = page.locator(".jp-DeepTutorChat-chip").count()
        cards = turn.locator("details.jp-DeepTutorChat-context")
        assert cards.count() == 2
        for i in range(2):
            cards.nth(i).locator("summary").click()
        shown = [cards.nth(i).inner_text() for i in range(2)]
    assert chips_left == 0  # they went with the question
    assert "cell [2]" in shown[0] and "rank_of_A = 2" in shown[0] and "A = [[" not in shown[0]
    assert "notes.md" in shown[1] and "counts the pivots" in shown[1]
    sent = json.dumps([m for m in fake_llm.requests[0].body["messages"] if m["role"] == "user"])
    assert "rank_of_A = 2" in sent and "counts the pivots" in sent
    assert "What is the rank of A?" in sent


@needs_chromium
def test_a_binary_file_dropped_on_the_chat_is_refused_on_its_chip(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    (tmp_path / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    write_notebook(tmp_path / "bin.ipynb", "x = 1")
    with lab_page("sidebar-drag-binary") as page:
        open_notebook(page, lab, "bin.ipynb")
        open_tutor(page)
        page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:activate')")
        item = page.locator(".jp-DirListing-item", has_text="plot.png")
        item.wait_for()
        target = page.locator(".jp-DeepTutorChat-input textarea")
        drag(page, item, target)
        target.fill("What does this plot show?")
        page.locator(".jp-DeepTutorChat-input button", has_text="Ask").click()
        chip = page.locator(".jp-DeepTutorChat-chip.jp-mod-error")
        chip.wait_for()
        page.screenshot(path=str(Path(__file__).parent / "artifacts" / "sidebar-drag-refused.png"))
        words = chip.inner_text()
        kept = target.input_value()
        turns = page.locator(".jp-DeepTutorChat-turn").count()
        chip.locator("button").click()
        chips_after = page.locator(".jp-DeepTutorChat-chip").count()
    assert "not a text file" in words
    assert kept == "What does this plot show?"  # nothing lost
    assert turns == 0 and fake_llm.requests == []
    assert chips_after == 0


QUIZ = {
    "title": "Squares",
    "objective": "squares",
    "questions": [
        {
            "id": "q1",
            "kind": "choice",
            "prompt": "Which is 2 squared?",
            "options": [{"id": "a", "label": "two"}, {"id": "b", "label": "four"}],
            "answer": ["b"],
            "explanation": "Two times two is four.",
        },
        {"id": "q2", "kind": "numeric", "prompt": "What is $3^2$?", "answer": 9.0},
        {
            "id": "q3",
            "kind": "code",
            "prompt": "Write sq(x).",
            "starter": "def sq(x):\n    ...",
            "tests": "assert sq(3) == 9",
            "timeout_s": 5,
        },
    ],
}


@needs_chromium
def test_a_quiz_in_the_panel_is_answered_and_graded(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend(
        [
            Reply(text="A quick check.", tool_calls=[ToolCallSpec("make_quiz", QUIZ, id="call_q")]),
            Reply(text="Well done on squares."),
        ]
    )
    write_notebook(tmp_path / "quiz.ipynb", "x = 1")
    with lab_page("sidebar-quiz") as page:
        open_notebook(page, lab, "quiz.ipynb")
        open_tutor(page)
        page.locator(".jp-DeepTutorChat-input textarea").fill("Quiz me on squares.")
        page.locator(".jp-DeepTutorChat-input button", has_text="Ask").click()
        card = page.locator("#deeptutor-panel .jp-DeepTutorQuiz")
        card.wait_for(timeout=60000)
        before = card.inner_text()
        submit = card.locator("button", has_text="Submit answers")
        assert submit.is_disabled()  # nothing answered yet
        card.locator("label", has_text="four").click()
        # Prompts are Markdown with LaTeX, typeset by JupyterLab's renderer.
        card.locator(".jp-DeepTutorQuiz-question[data-question-id='q2'] mjx-container").wait_for()
        card.locator(".jp-DeepTutorQuiz-input").fill("9")
        card.locator(".jp-DeepTutorQuiz-code .cm-content").fill("def sq(x):\n    return x * x\n")
        page.screenshot(path=str(Path(__file__).parent / "artifacts" / "sidebar-quiz-form.png"))
        submit.click()
        receipt = card.locator(".jp-DeepTutorQuiz-receipt")
        receipt.wait_for(timeout=60000)
        page.locator(".jp-DeepTutorChat-turn[data-status='done']").wait_for(timeout=60000)
        page.locator(".jp-DeepTutorChat-turn").get_by_text("Well done on squares.").first.wait_for()
        graded = receipt.inner_text()
        inputs_left = card.locator("input, textarea").count()
    assert "Two times two is four." not in before  # no answers before grading
    assert "Score 100%" in graded and "four" in graded and "Two times two is four." in graded
    assert inputs_left == 0  # a read-only receipt
    tool = [m for r in fake_llm.requests for m in r.body["messages"] if m.get("tool_call_id")]
    assert len(tool) == 1 and tool[0]["tool_call_id"] == "call_q"
    assert json.loads(tool[0]["content"])["score"] == 1.0


@needs_chromium
def test_ask_about_this_cell_attaches_the_cell_and_the_selected_text(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([Reply(text="That line stores the rank.")])
    write_notebook(
        tmp_path / "select.ipynb", "A = [[1, 2], [2, 4]]\nrank_of_A = 2", "shape = (2, 2)"
    )
    with lab_page("sidebar-selection") as page:
        open_notebook(page, lab, "select.ipynb")
        run_all(page)
        editor = page.locator(".jp-Cell .jp-InputArea-editor").first
        editor.get_by_text("rank_of_A").click()
        page.keyboard.press("End")
        page.keyboard.press("Shift+Home")
        editor.get_by_text("rank_of_A").click(button="right")
        page.locator(".lm-Menu-item", has_text="Ask the tutor about this cell").click()
        page.locator(".jp-DeepTutorChat-chip", has_text="Cell [1]").wait_for()
        quote = page.locator(".jp-DeepTutorChat-chip.jp-mod-quote")
        quote.wait_for()
        quoted = quote.inner_text()
        page.wait_for_function(  # the question comes next: the cursor is in the chat box
            "() => document.activeElement?.closest('.jp-DeepTutorChat-input') != null"
        )
        page.locator(".jp-DeepTutorChat-input textarea").fill("What does this line do?")
        page.locator(".jp-DeepTutorChat-input button", has_text="Ask").click()
        turn = page.locator(".jp-DeepTutorChat-turn[data-status='done']")
        turn.wait_for(timeout=60000)
        cards = turn.locator("details.jp-DeepTutorChat-context")
        cards.nth(1).locator("summary").click()
        selection_card = cards.nth(1).inner_text()
        # Right-clicked in another cell's editor while cell [1] stays the active one: the
        # right-clicked cell is attached, not the active one.
        editor.get_by_text("rank_of_A").click()
        other = page.locator(".jp-Cell .jp-InputArea-editor").nth(1)
        other.get_by_text("shape").click(button="right")
        first_active = page.evaluate(
            "() => document.querySelector('.jp-Notebook .jp-Cell.jp-mod-active') === "
            "document.querySelectorAll('.jp-Notebook .jp-Cell')[0]"
        )
        page.locator(".lm-Menu-item", has_text="Ask the tutor about this cell").click()
        page.locator(".jp-DeepTutorChat-chip", has_text="Cell [2]").wait_for()
        chips = page.locator(".jp-DeepTutorChat-chip").all_inner_texts()
    assert first_active, "the test must right-click a cell that is not the active one"
    assert not any("Cell [1]" in c for c in chips)
    assert "rank_of_A = 2" in quoted and "A = [[" not in quoted
    assert "I selected this in cell [1]" in selection_card
    assert "> rank_of_A = 2" in selection_card
    sent = json.dumps([m for m in fake_llm.requests[0].body["messages"] if m["role"] == "user"])
    assert "> rank_of_A = 2" in sent
