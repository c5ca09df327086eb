"""The instructor's policy badge in real JupyterLab: an exercise cell under a hints policy shows
"Hints only — 1 of 2 used" with where the policy comes from, live and in the finished cell's
static rendering (docs/policy.md#the-badge)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.ui.test_lab import lab_page, needs_chromium, open_notebook, write_notebook

pytestmark = pytest.mark.ui

HOMEWORK = """---
policy:
  - {mode: hints, tags: [exercise], hints: 2}
  - mode: full
---
"""


@needs_chromium
def test_the_policy_badge_shows_in_the_cell(lab: str, fake_llm: FakeLLMServer, tmp_path: Path):
    (tmp_path / "TUTOR.md").write_text(HOMEWORK, encoding="utf-8")
    fake_llm.extend([Reply(text="Look at the loop bounds."), Reply(text="Loops repeat a block.")])
    path = tmp_path / "homework.ipynb"
    write_notebook(
        path,
        "%load_ext deeptutor_jupyter",
        "%tutor Help with exercise 1",
        "%tutor Explain loops",
    )
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].metadata["tags"] = ["exercise"]  # as the instructor handed it out
    nbformat.write(nb, path)
    source = tmp_path / "TUTOR.md"
    with lab_page("lab-policy-badge") as page:
        open_notebook(page, lab, "homework.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        cells = page.locator(".jp-Notebook .jp-Cell")
        hinted = cells.nth(1)
        hinted.get_by_text("Look at the loop bounds.").wait_for()
        hinted.get_by_text(f"Hints only — 1 of 2 used (from {source})").wait_for()
        free = cells.nth(2)
        free.get_by_text("Loops repeat a block.").wait_for()
        free.get_by_text(f"Full help (from {source})").wait_for()
        assert "Hints only" not in free.inner_text()
        # Once the turn has ended the widgets become the static rendering: the badge stays.
        hinted.locator(".dt-static", has_text="Look at the loop bounds.").wait_for()
        assert "Hints only — 1 of 2 used" in hinted.locator(".dt-static").inner_text()
