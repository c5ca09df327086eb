"""Keys typed into a cell's quiz form stay in the form, and its code question is JupyterLab's own
code editor, in real JupyterLab and Chromium (issue 21): CodeMirror with Python highlighting,
Enter indents after a colon, Tab indents and Shift+Tab dedents; "a b m r y 0 0", Ctrl+Enter and
Shift+Enter are text, not notebook shortcuts (no cell inserted, none turned raw or Markdown, no
"Restart Kernel?" dialog, no re-run); Escape leaves the form for the notebook. Then Submit with
blanks asks first, and "Submit anyway" sends the code exactly as typed, which the kernel grades
and the saved receipt shows. Screenshots: tests/ui/artifacts/form-keys*.png."""

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
# The widget's own textarea, under the editor: its value is what ipywidgets sends the kernel.
VALUE_JS = "() => document.querySelector('.dt-quiz-code textarea').value"
# CodeMirror over the hidden textarea, and "def" a highlighted token (coloured unlike plain text).
EDITOR_JS = """() => {
  const box = document.querySelector('.dt-quiz-code');
  const content = box.querySelector('.cm-editor .cm-content[contenteditable=true]');
  const def = [...box.querySelectorAll('.cm-line span')].find(s => s.textContent === 'def');
  return {
    editor: !!content && !!box.closest('.jp-OutputArea-output'),
    textarea: getComputedStyle(box.querySelector('textarea')).display,
    keyword: !!def && getComputedStyle(def).color !== getComputedStyle(content).color,
  };
}"""
SET_VALUE_JS = "(text) => { document.querySelector('.dt-quiz-code textarea').value = text; }"
SHOWN_JS = "(text) => document.querySelector('.dt-quiz-code .cm-content').innerText.includes(text)"
# The editor's host, kept across Submit: once the form is gone, its CodeMirror view is destroyed.
KEEP_HOST_JS = "() => { window.dtHost = document.querySelector('.dt-code-editor'); }"
FREED_JS = "() => !window.dtHost.isConnected && !window.dtHost.querySelector('.cm-editor')"
TYPED = "def sq(x):\n    return x * x\n    #abmry00\n"


def notebook_state(page: Any) -> tuple[list[str], int]:
    return page.evaluate(CELLS_JS), page.locator(".jp-Dialog").count()


def run_quiz_notebook(page: Any, lab: str, folder: Path, name: str) -> None:
    """A notebook whose second cell asks for a quiz, opened and run."""
    write_notebook(folder / name, "%load_ext deeptutor_jupyter", "%tutor Quiz me")
    open_notebook(page, lab, name)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def type_shortcuts(page: Any) -> None:
    """A new line of notebook shortcuts, typed into the focused code box: text there."""
    page.keyboard.press("Enter")
    page.keyboard.type("#")
    for key in ["a", "b", "m", "r", "y", "0", "0"]:  # notebook shortcuts in command mode
        page.keyboard.press(key)
    page.keyboard.press("Control+Enter")  # "run cell": would start the quiz's turn again
    page.keyboard.press("Shift+Enter")  # "run cell and advance"; a newline here
    page.wait_for_timeout(500)  # any command the keys triggered has run by now


@needs_chromium
def test_a_quiz_code_answer_is_a_python_editor_whose_keys_stay_there_and_blanks_ask_first(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([quiz_reply(QUIZ), Reply(text="Noted, let us look at squares.")])
    with lab_page("form-keys") as page:
        run_quiz_notebook(page, lab, tmp_path, "keys.ipynb")
        card = page.locator(".dt-quiz")
        code = card.locator(".dt-quiz-code .cm-content")
        code.wait_for()
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
        before = notebook_state(page)
        assert before == (["code", "code"], 0)
        # The widget's value set from its model (another view of the widget typed, or the
        # kernel) is assigned to the textarea, as ipywidgets does: the editor shows it.
        page.evaluate(SET_VALUE_JS, "def other():\n    pass")
        page.wait_for_function(SHOWN_JS, arg="def other():")
        code.click()
        page.keyboard.press("Control+a")
        page.keyboard.press("Delete")
        page.keyboard.type("def sq(x):")
        page.keyboard.press("Enter")  # Python: the body is indented
        assert page.evaluate(VALUE_JS) == "def sq(x):\n    "
        page.keyboard.press("Tab")  # one level more, the focus stays in the editor
        assert page.evaluate(FOCUS_JS)
        page.keyboard.type("return x * x")
        assert page.evaluate(VALUE_JS) == "def sq(x):\n        return x * x"
        page.keyboard.press("Shift+Tab")  # the level Tab added comes off
        assert page.evaluate(VALUE_JS) == "def sq(x):\n    return x * x"
        type_shortcuts(page)
        typed = page.evaluate(VALUE_JS)
        editor = page.evaluate(EDITOR_JS)
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
        page.evaluate(KEEP_HOST_JS)
        card.locator(".dt-quiz-anyway").click()
        # The turn has ended: its cell is the static rendering, the graded quiz included.
        receipt = page.locator(".dt-static", has_text="Noted, let us look at squares.")
        receipt.wait_for(timeout=60000)
        receipt_text = receipt.inner_text()
        freed = page.evaluate(FREED_JS)
        receipt.screenshot(path=str(ARTIFACTS / "form-keys-receipt.png"))
    assert editor == {"editor": True, "textarea": "none", "keyword": True}
    assert typed == TYPED
    assert after == before  # no cell inserted, none changed type, no dialog
    assert still_focused and left
    assert requests == 1  # the quiz's turn only: nothing re-ran the cell
    result = json.loads(tool_messages(fake_llm, "call_quiz_1")[0]["content"])
    by_id = {r["id"]: r for r in result["results"]}
    assert by_id["q3"]["given"] == TYPED and by_id["q3"]["correct"] is True
    assert by_id["q1"]["answered"] is False and by_id["q2"]["answered"] is False
    assert receipt_text.count("(not answered)") == 2
    assert freed  # the form gone, its editor is destroyed, not left running off the page
    assert TYPED.rstrip() in receipt_text  # the saved receipt shows the code as typed
