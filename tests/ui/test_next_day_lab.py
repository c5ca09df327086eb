"""The next day (issue 20): turns run, the notebook is saved, JupyterLab stops; a new JupyterLab
opens the file with a fresh kernel and shows every answer, never "model not found"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.learning.test_learning_notebook import NOTEBOOK, learning_notebook, learning_replies
from tests.ui.test_lab import (
    ARTIFACTS,
    ask_reply,
    lab_page,
    lab_server,
    needs_chromium,
    open_notebook,
    save_until_on_disk,
    write_notebook,
)

ANSWER = "An eigenvalue $\\lambda$ satisfies $A v = \\lambda v$ for some vector $v \\neq 0$."


def run_cell(page: Any, index: int) -> None:
    page.evaluate(
        "(i) => { const nb = window.jupyterapp.shell.currentWidget;"
        " nb.content.activeCellIndex = i;"
        " return window.jupyterapp.commands.execute('notebook:run-cell'); }",
        index,
    )


@needs_chromium
def test_a_notebook_reopened_after_a_lab_restart_shows_its_answers(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([Reply(text=ANSWER), ask_reply("call_next_day"), Reply(text="We analyse.")])
    write_notebook(
        tmp_path / "next_day.ipynb",
        "%load_ext deeptutor_jupyter",
        "%tutor What is an eigenvalue?",
        "%tutor How should we proceed?",
    )
    with lab_server(tmp_path, fake_llm) as lab, lab_page("next-day-1-live") as page:
        open_notebook(page, lab, "next_day.ipynb")
        run_cell(page, 0)
        run_cell(page, 1)
        page.locator(".dt-static", has_text="An eigenvalue").wait_for()
        run_cell(page, 2)  # one turn at a time: the fake model answers in order
        card = page.locator(".dt-ask-user")
        card.locator("label", has_text="Analyse first").first.click()
        card.locator(".dt-ask-submit").click()
        page.locator(".dt-static", has_text="We analyse.").wait_for()
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function(
            "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=10000
        )
    saved = json.loads((tmp_path / "next_day.ipynb").read_text())
    kinds = [list(o.get("data", {})) for c in saved["cells"][1:] for o in c["outputs"]]
    assert kinds and all("text/html" in k for k in kinds), kinds

    with lab_server(tmp_path, fake_llm) as lab, lab_page("next-day-2-reopened") as page:
        open_notebook(page, lab, "next_day.ipynb")  # a fresh kernel: no widget model survives
        page.locator(".dt-static", has_text="We analyse.").wait_for()
        page.locator(".jp-Cell").nth(1).locator("mjx-container").first.wait_for()
        text = page.locator(".jp-Notebook").inner_text()
    assert "model not found" not in text and "Error displaying widget" not in text
    assert "An eigenvalue" in text and "Analyse first" in text and "How should we proceed?" in text


@needs_chromium
def test_a_learning_notebook_reopened_the_next_day_shows_path_quiz_review_and_progress(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """The learning-path notebook run in JupyterLab (a path started, a quiz and a review
    graded, progress drawn; the Start and Submit clicks are cells calling the same doors),
    saved, then opened in a new JupyterLab with a fresh kernel: everything reads as it was,
    the chart is an image, nothing needs a widget model."""
    work, nb = learning_notebook(tmp_path)
    nbformat.write(nb, work / NOTEBOOK.name)
    fake_llm.extend(learning_replies())
    # Every cell in the page, not only those scrolled into view, so the whole notebook is read.
    tracker = work / "jupyter-config" / "lab" / "user-settings" / "@jupyterlab"
    tracker = tracker / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True, exist_ok=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    with lab_server(work, fake_llm) as lab, lab_page("next-day-3-learning-live") as page:
        open_notebook(page, lab, NOTEBOOK.name)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.get_by_text("review 0.333").wait_for(timeout=120000)
        page.locator(".dt-static", has_text="All three right").wait_for(timeout=60000)
        save_until_on_disk(page, work / NOTEBOOK.name, "All three right")
    with lab_server(work, fake_llm) as lab, lab_page("next-day-3-learning") as page:
        open_notebook(page, lab, NOTEBOOK.name)
        for words in ("score 100%", "score 33%", "All three right", "Diagonalisation"):
            page.get_by_text(words).first.wait_for()
        page.locator(".jp-OutputArea-output img").first.wait_for()  # the progress chart
        page.locator(".jp-OutputArea-output mjx-container").first.wait_for()
        text = page.locator(".jp-Notebook").inner_text()
        for words, name in (("score 100%", "quiz"), ("score 33%", "review")):
            page.get_by_text(words).first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / f"next-day-3-learning-{name}.png"))
    assert "model not found" not in text and "Error displaying widget" not in text
    assert "open the notebook with its kernel to answer" not in text
