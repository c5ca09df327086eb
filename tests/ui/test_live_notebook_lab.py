"""read_notebook reads the notebook on screen: a cell edited and run but not saved is what the
model sees, in real JupyterLab and Chromium with the Tutor panel open (issue 20, item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.ui.test_lab import lab_page, needs_chromium, open_notebook, write_notebook
from tests.ui.test_sidebar import open_tutor

pytestmark = pytest.mark.ui

EDITED = "evens = [n for n in range(10) if n % 2 == 0]\nprint(evens)"


def run_cell(page: object, index: int) -> None:
    """Run one cell as the learner does (select it, Shift+Enter's command); wait for the run."""
    page.evaluate(  # type: ignore[attr-defined]
        """async (index) => {
            const nb = window.jupyterapp.shell.currentWidget.content;
            nb.activeCellIndex = index;
            await window.jupyterapp.commands.execute('notebook:run-cell');
        }""",
        index,
    )


@needs_chromium
def test_read_notebook_sees_an_edited_unsaved_cell(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    read = ToolCallSpec("read_notebook", {}, id="call_on_screen")
    fake_llm.extend([Reply(text="Let me look.", tool_calls=[read]), Reply(text="Evens fine.")])
    path = tmp_path / "evens.ipynb"
    write_notebook(path, "%load_ext deeptutor_jupyter", "evens = None", "%tutor check my evens")
    with lab_page("lab-live-notebook") as page:
        open_notebook(page, lab, "evens.ipynb")
        open_tutor(page)
        run_cell(page, 0)
        page.evaluate(
            """(source) => window.jupyterapp.shell.currentWidget.content.model.cells.get(1)
                .sharedModel.setSource(source)""",
            EDITED,
        )
        run_cell(page, 1)
        page.get_by_text("[0, 2, 4, 6, 8]").first.wait_for()
        run_cell(page, 2)
        page.get_by_text("Evens fine.").first.wait_for(timeout=60000)
        # The tool card says what was read.
        page.get_by_text(
            "cells from the notebook on screen (unsaved changes included)"
        ).first.wait_for()
    assert "evens = None" in path.read_text(encoding="utf-8")  # never saved
    seen = [
        m["content"]
        for r in fake_llm.requests
        for m in r.body["messages"]
        if m.get("tool_call_id") == "call_on_screen"
    ]
    assert seen, "read_notebook never answered"
    assert seen[0].startswith(
        "Notebook cells from the notebook on screen (unsaved changes included)"
    ), seen[0]
    assert "(code, ran as [" in seen[0] and EDITED in seen[0]
    assert "Output:\n[0, 2, 4, 6, 8]" in seen[0] and "evens = None" not in seen[0]
