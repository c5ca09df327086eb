"""Keys typed into a cell's quiz form stay in the form, in real JupyterLab and Chromium (issue 21):
Tab indents in the code box; "a b m r y 0 0", Ctrl+Enter and Shift+Enter are text, not notebook
shortcuts (no cell inserted, none turned raw or Markdown, no "Restart Kernel?" dialog, no re-run);
Escape leaves the form for the notebook. Then Submit with blanks asks first, and "Submit anyway"
sends the typed code. Screenshots: tests/ui/artifacts/form-keys*.png."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.learning.test_quiz_kernel import QUIZ, quiz_reply, tool_messages
from tests.ui.test_lab import (
    ARTIFACTS,
    fake_llm,
    lab,
    lab_page,
    needs_chromium,
    open_notebook,
    write_notebook,
)

pytestmark = pytest.mark.ui
__all__ = ["fake_llm", "lab"]

CELLS_JS = "() => window.jupyterapp.shell.currentWidget.content.widgets.map(w => w.model.type)"
FOCUS_JS = "() => !!document.activeElement && !!document.activeElement.closest('.dt-quiz-code')"
TYPED = "def sq(x):\n    return x * x\n#abmry00\n"


def notebook_state(page: Any) -> tuple[list[str], int]:
    return page.evaluate(CELLS_JS), page.locator(".jp-Dialog").count()


@needs_chromium
def test_keys_in_a_quiz_code_box_stay_there_and_blanks_ask_first(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([quiz_reply(QUIZ), Reply(text="Noted, let us look at squares.")])
    write_notebook(tmp_path / "keys.ipynb", "%load_ext deeptutor_jupyter", "%tutor Quiz me")
    with lab_page("form-keys") as page:
        open_notebook(page, lab, "keys.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        card = page.locator(".dt-quiz")
        code = card.locator(".dt-quiz-code textarea")
        code.wait_for()
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
        before = notebook_state(page)
        assert before == (["code", "code"], 0)
        code.click()
        page.keyboard.press("Control+a")
        page.keyboard.press("Delete")
        page.keyboard.type("def sq(x):")
        page.keyboard.press("Enter")
        page.keyboard.press("Tab")  # indents, keeps the focus in the box
        assert page.evaluate(FOCUS_JS)
        page.keyboard.type("return x * x")
        page.keyboard.press("Enter")
        page.keyboard.press("Tab")
        page.keyboard.press("Shift+Tab")  # dedents what Tab added
        page.keyboard.type("#")
        for key in ["a", "b", "m", "r", "y", "0", "0"]:  # notebook shortcuts in command mode
            page.keyboard.press(key)
        page.keyboard.press("Control+Enter")  # "run cell": would start the quiz's turn again
        page.keyboard.press("Shift+Enter")  # "run cell and advance"; a newline here
        page.wait_for_timeout(500)  # any command the keys triggered has run by now
        typed = code.input_value()
        requests = len(fake_llm.requests)
        after = notebook_state(page)
        still_focused = page.evaluate(FOCUS_JS)
        card.screenshot(path=str(ARTIFACTS / "form-keys-typed.png"))
        page.keyboard.press("Escape")  # leaves the form for the notebook
        page.wait_for_selector(".jp-Notebook.jp-mod-commandMode")
        left = not page.evaluate(FOCUS_JS)
        # Submit with two blanks asks first; Submit anyway sends the code as typed.
        card.locator(".dt-quiz-submit").click()
        confirm = card.locator(".dt-quiz-confirm")
        confirm.get_by_text("2 of 3 questions are not answered").wait_for()
        card.screenshot(path=str(ARTIFACTS / "form-keys-confirm.png"))
        assert not tool_messages(fake_llm, "call_quiz_1")  # nothing submitted yet
        card.locator(".dt-quiz-anyway").click()
        # The turn has ended: its cell is the static rendering, the graded quiz included.
        receipt = page.locator(".dt-static", has_text="Noted, let us look at squares.")
        receipt.wait_for(timeout=60000)
        receipt_text = receipt.inner_text()
        receipt.screenshot(path=str(ARTIFACTS / "form-keys-receipt.png"))
    assert typed == TYPED
    assert after == before  # no cell inserted, none changed type, no dialog
    assert still_focused and left
    assert requests == 1  # the quiz's turn only: nothing re-ran the cell
    result = json.loads(tool_messages(fake_llm, "call_quiz_1")[0]["content"])
    by_id = {r["id"]: r for r in result["results"]}
    assert by_id["q3"]["given"] == TYPED and by_id["q3"]["correct"] is True
    assert by_id["q1"]["answered"] is False and by_id["q2"]["answered"] is False
    assert receipt_text.count("(not answered)") == 2
