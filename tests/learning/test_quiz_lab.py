"""A make_quiz form in real JupyterLab and Chromium: answered as a student would, graded, and
shown as a receipt with the explanation; a screenshot of each (tests/ui/artifacts/quiz-*.png)
and nothing wider than the output area."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.learning.test_quiz_kernel import QUIZ, quiz_reply, tool_messages
from tests.ui.test_forms_lab import OVERFLOW_JS
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


@needs_chromium
def test_a_quiz_in_lab_is_answered_graded_and_explained(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([quiz_reply(QUIZ), Reply(text="Well done, all three.")])
    write_notebook(tmp_path / "quiz.ipynb", "%load_ext deeptutor_jupyter", "%tutor Quiz me")
    with lab_page("quiz") as page:
        open_notebook(page, lab, "quiz.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        card = page.locator(".dt-quiz")
        card.locator(".dt-quiz-submit").wait_for()
        page.wait_for_timeout(300)
        card.screenshot(path=str(ARTIFACTS / "quiz-form.png"))
        assert card.evaluate(OVERFLOW_JS) == []
        assert "EXPLAINED" not in page.content() and "HIDDEN-TEST" not in page.content()
        card.locator("label", has_text="four").first.click()
        card.locator("input[type=text]").first.fill("3.001 m/s")
        # The code answer is JupyterLab's editor over the widget's textarea (labextension).
        card.locator(".dt-quiz-code .cm-content").fill("def sq(x):\n    return x * x\n")
        page.wait_for_timeout(300)
        card.locator(".dt-quiz-submit").click()
        # The turn has ended: its cell is the static rendering, the graded quiz included.
        receipt = page.locator(".dt-static", has_text="Well done, all three.")
        receipt.wait_for()
        shown = receipt.inner_text()
        assert "Because-the-determinant-EXPLAINED" in shown and "score 100%" in shown
        assert "four" in shown and "3.001 m/s" in shown and "return x * x" in shown
        page.wait_for_timeout(300)
        receipt.screenshot(path=str(ARTIFACTS / "quiz-receipt.png"))
    result = json.loads(tool_messages(fake_llm, "call_quiz_1")[0]["content"])
    assert [r["correct"] for r in result["results"]] == [True, True, True]
