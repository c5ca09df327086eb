"""A notebook saved with finished turns, read in Notebook 7 the next day (issue 20, item 2):
the answer with its LaTeX typeset, the learner's choice by its label, their typed text and the
graded quiz, and never "Error displaying widget: model not found", with a fresh kernel that
never had the widget models. The turns run in a real kernel with the fake model; the file is
what a frontend saves from iopub."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from deeptutor_jupyter.testing import FakeLLMServer
from tests.e2e.conftest import kernel  # noqa: F401  (the fixture)
from tests.e2e.kernel_driver import KernelDriver
from tests.e2e.test_static_outputs import TYPED, saved_notebook, three_turns
from tests.learning.test_quiz_kernel import EXPLANATION
from tests.ui.test_lab import TOKEN, lab_page, lab_server, needs_chromium

pytestmark = pytest.mark.ui


@needs_chromium
def test_a_saved_notebook_reads_right_in_notebook_7(
    kernel: KernelDriver,  # noqa: F811
    fake_llm: FakeLLMServer,
    tmp_path: Path,
) -> None:
    nb = saved_notebook(kernel, three_turns(kernel, fake_llm))
    served = tmp_path / "served"
    served.mkdir()
    nbformat.write(nb, served / "saved.ipynb")
    with lab_server(served, fake_llm, app="notebook") as url, lab_page("notebook7") as page:
        page.goto(f"{url}/notebooks/saved.ipynb?token={TOKEN}")
        page.wait_for_selector(".jp-Notebook .jp-OutputArea-output", timeout=60000)
        for words in ("Analyse first", TYPED, "score 100%", EXPLANATION, "Nice work on squares."):
            page.get_by_text(words).first.wait_for()
        # MathJax typeset the answer's LaTeX (the raw "$\lambda$" is gone from the page).
        page.locator(".jp-OutputArea-output mjx-container").first.wait_for()
        shown = page.locator(".jp-Notebook").inner_text()
        assert "What is an eigenvalue?" in shown and "$\\lambda$" not in shown
        assert "model not found" not in shown and "Error displaying widget" not in shown
        # Nor a Stop button (the status line draws it while a turn runs): a finished turn is
        # its static output.
        assert page.locator(".dt-stop-button, .dt-stop").count() == 0 and "Stop" not in shown
        page.wait_for_timeout(300)  # fonts settle before the screenshot the test leaves
