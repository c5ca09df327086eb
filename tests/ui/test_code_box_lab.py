"""Where our labextension is absent, a quiz's code answer still indents (issue 21): JupyterLab
with the extension disabled in Chromium, the box is our anywidget textarea (code_box.js), drawn
through anywidget's own extension. Enter keeps the indentation after a colon, Tab indents to the
next four spaces (a selection: each line), Shift+Tab dedents, notebook shortcuts typed there stay
text (no cell inserted or retyped, no dialog, no re-run), Escape leaves, a value the kernel sets
is shown, the box fits the output area, and the graded answer is the code as typed.
Screenshot: tests/ui/artifacts/code-box-typed.png.

And a streamed answer (kernel/widgets/answer_stream.js) reads as plain text while it streams
there, then the turn's end shows its static HTML (tests/ui/artifacts/plain-answer-mid.png)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.learning.test_quiz_kernel import QUIZ, quiz_reply, tool_messages
from tests.ui.test_form_keys_lab import (
    FOCUS_JS,
    TYPED,
    VALUE_JS,
    notebook_state,
    run_quiz_notebook,
    type_shortcuts,
)
from tests.ui.test_forms_lab import OVERFLOW_JS
from tests.ui.test_lab import (
    ARTIFACTS,
    fake_llm,
    lab_page,
    lab_server,
    needs_chromium,
    open_notebook,
    write_notebook,
)

pytestmark = pytest.mark.ui
__all__ = ["fake_llm"]

# The kernel sets the box's value (as another view's typing would reach this one): it is shown.
FROM_KERNEL = (
    "from deeptutor_jupyter.kernel.quiz_cards import _cards\n"
    "for card in _cards.values():\n"
    "    card.controls['q3'][1].value = 'def other():\\n    pass'\n"
)
RUN_JS = """(code) => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel
  .requestExecute({ code, silent: true }).done.then((reply) => reply.content.status)"""
SHOWN_JS = "(text) => document.querySelector('.dt-quiz-code textarea').value === text"
SELECTED = "() => { const b = document.querySelector('.dt-quiz-code textarea'); b.select(); }"


@pytest.fixture
def lab_without_ours(tmp_path: Path, fake_llm: FakeLLMServer) -> Iterator[str]:
    """JupyterLab as a learner has it when our labextension is disabled (page_config.json)."""
    config = tmp_path / "jupyter-config" / "labconfig" / "page_config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"disabledExtensions": {"deeptutor-jupyter": True}}))
    with lab_server(tmp_path, fake_llm) as url:
        yield url


def typed_keys(page: Any) -> list[str]:
    """Values after Enter, Tab, a line, Shift+Tab, then all selected with Tab and Shift+Tab."""
    keys = page.keyboard
    keys.type("def sq(x):")
    keys.press("Enter")  # after a colon: the body is indented
    seen = [page.evaluate(VALUE_JS)]
    keys.press("Tab")
    keys.type("return x * x")
    seen.append(page.evaluate(VALUE_JS))
    keys.press("Shift+Tab")
    seen.append(page.evaluate(VALUE_JS))
    page.evaluate(SELECTED)
    keys.press("Tab")  # every selected line one level in
    seen.append(page.evaluate(VALUE_JS))
    keys.press("Shift+Tab")
    seen.append(page.evaluate(VALUE_JS))
    keys.press("End")
    return seen


@needs_chromium
def test_without_our_labextension_the_code_box_indents_and_keeps_its_keys(
    lab_without_ours: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([quiz_reply(QUIZ), Reply(text="Noted, let us look at squares.")])
    with lab_page("code-box") as page:
        run_quiz_notebook(page, lab_without_ours, tmp_path, "plain.ipynb")
        card = page.locator(".dt-quiz")
        box = card.locator(".dt-quiz-code textarea")
        box.wait_for()
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
        ours = page.evaluate("() => window.jupyterapp.hasPlugin('deeptutor-jupyter:plugin')")
        editors = card.locator(".cm-editor").count()
        wide = card.evaluate(OVERFLOW_JS)  # the box fits the output area, as ipywidgets' did
        before = notebook_state(page)
        assert before == (["code", "code"], 0)
        assert page.evaluate(RUN_JS, FROM_KERNEL) == "ok"
        page.wait_for_function(SHOWN_JS, arg="def other():\n    pass")
        box.click()
        page.keyboard.press("Control+a")
        page.keyboard.press("Delete")
        seen = typed_keys(page)
        type_shortcuts(page)
        typed = page.evaluate(VALUE_JS)
        after = notebook_state(page)
        still_focused = page.evaluate(FOCUS_JS)
        requests = len(fake_llm.requests)
        card.screenshot(path=str(ARTIFACTS / "code-box-typed.png"))
        page.keyboard.press("Escape")
        page.wait_for_function(f"() => !({FOCUS_JS})()")
        card.locator(".dt-quiz-submit").click()
        card.locator(".dt-quiz-anyway").click()  # q1 and q2 are blank: submit anyway
        page.locator(".dt-static", has_text="Noted, let us look at squares.").wait_for(
            timeout=60000
        )
    assert not ours and editors == 0  # our extension is off: no CodeMirror over the box
    assert wide == []
    assert seen == [
        "def sq(x):\n    ",
        "def sq(x):\n        return x * x",
        "def sq(x):\n    return x * x",
        "    def sq(x):\n        return x * x",
        "def sq(x):\n    return x * x",
    ]
    assert typed == TYPED
    assert after == before  # no cell inserted, none changed type, no dialog
    assert still_focused and requests == 1  # Tab never left; nothing re-ran the cell
    result = json.loads(tool_messages(fake_llm, "call_quiz_1")[0]["content"])
    q3 = {r["id"]: r for r in result["results"]}["q3"]
    assert q3["given"] == TYPED and q3["correct"] is True


@needs_chromium
def test_without_our_labextension_a_streamed_answer_reads_as_plain_text(
    lab_without_ours: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    chunks = ["The **key** step: ", "$A v = \\lambda v$, ", "so `v` keeps ", "its direction."]
    resume = threading.Event()  # the answer waits mid-way until the page has been looked at
    fake_llm.add(Reply(chunks=chunks, chunk_delay=0.05, hold_after=3, hold=resume))
    write_notebook(tmp_path / "plain.ipynb", "%load_ext deeptutor_jupyter", "%tutor Why?")
    with lab_page("plain-answer") as page:
        open_notebook(page, lab_without_ours, "plain.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        so_far = "".join(chunks[:3]).strip()
        page.wait_for_function(
            "(t) => document.querySelector('.dt-answer .dt-text')?.innerText.trim() === t",
            arg=so_far,
            timeout=60000,
        )
        ours = page.evaluate("() => window.jupyterapp.hasPlugin('deeptutor-jupyter:plugin')")
        page.screenshot(path=str(ARTIFACTS / "plain-answer-mid.png"), full_page=True)
        resume.set()
        final = page.locator(".dt-static", has_text="its direction.")
        final.wait_for(timeout=60000)
        bold = final.locator("strong").all_inner_texts()
    assert not ours  # the module's own plain view: the Markdown shows as written, escaped
    assert "key" in bold  # and the finished turn is the static rendering, as everywhere
