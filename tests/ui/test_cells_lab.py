"""Cells written safely (issue 26), in real JupyterLab: a cell the tutor inserts while the learner
types in another goes into the open notebook's model (the labextension's cells.ts), so the
learner's unsaved edit stays, the focus stays in their cell, nothing is written under them on
disk, and one undo removes exactly the tutor's cell."""

from __future__ import annotations

import json
from pathlib import Path

from deeptutor_jupyter.testing import FakeLLMServer
from tests.ui.test_lab import (
    lab_page,
    needs_chromium,
    open_notebook,
    save_until_on_disk,
    write_notebook,
)

SOURCES_JS = (
    "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells"
    ".map(c => c.getSource())"
)
# What a turn does from the kernel, in the background like a turn: the cell is asked for while
# the learner's cell is being edited, and the kernel's cell stays free.
INSERT = """\
import asyncio
from deeptutor_jupyter.cells import NewCell, insert_cells
from deeptutor_jupyter.kernel.notebook_context import lab_frontend, notebook_path
_insert = asyncio.get_running_loop().create_task(insert_cells(
    notebook_path(), [NewCell(source="# Inserted by the tutor")], after={after!r},
    frontend=lab_frontend(get_ipython())))
"""
EDIT = """\
from deeptutor_jupyter.cells import Confirmed, edit_cell
_edit = asyncio.get_running_loop().create_task(edit_cell(
    notebook_path(), {cell!r}, "print(answer * 2)", Confirmed({cell!r}, "r1"),
    lab_frontend(get_ipython())))
"""
EXECUTE_JS = """(code) => {
    const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    kernel.requestExecute({code, silent: false, store_history: false});
}"""


def sources_are(page, expected: list[str]) -> None:
    page.wait_for_function(
        f"(expected) => JSON.stringify(({SOURCES_JS})()) === JSON.stringify(expected)",
        arg=expected,
    )


@needs_chromium
def test_a_cell_inserted_while_the_learner_types_in_another_loses_nothing(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    path = tmp_path / "edit.ipynb"
    write_notebook(path, "%load_ext deeptutor_jupyter", "answer = 1", "print(answer)")
    ids = [c["id"] for c in json.loads(path.read_text())["cells"]]
    with lab_page("cells-insert") as page:
        open_notebook(page, lab, "edit.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
        on_disk = path.read_bytes()
        page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".cm-content").click()
        page.keyboard.press("End")
        page.keyboard.type("  # mine")  # not saved
        page.evaluate(EXECUTE_JS, INSERT.format(after=ids[1]))
        inserted = ["%load_ext deeptutor_jupyter", "answer = 1  # mine", "# Inserted by the tutor"]
        sources_are(page, [*inserted, "print(answer)"])
        assert path.read_bytes() == on_disk  # the model got it; the file is the learner's to save
        # One undo removes the tutor's cell and nothing the learner typed; redo brings it back.
        page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.undo()"
        )
        sources_are(page, [*inserted[:2], "print(answer)"])
        page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.redo()"
        )
        sources_are(page, [*inserted, "print(answer)"])
        page.keyboard.type(", still typing")  # the focus stayed in the learner's cell
        sources_are(
            page, [inserted[0], "answer = 1  # mine, still typing", inserted[2], "print(answer)"]
        )
        # A confirmed edit of another cell goes into the model too (the confirmation itself is
        # tests/cells' business): the learner's typing is untouched.
        page.evaluate(EXECUTE_JS, EDIT.format(cell=ids[2]))
        sources_are(
            page,
            [inserted[0], "answer = 1  # mine, still typing", inserted[2], "print(answer * 2)"],
        )
        assert path.read_bytes() == on_disk
        save_until_on_disk(page, path, "still typing")
    saved = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    assert saved == [
        inserted[0],
        "answer = 1  # mine, still typing",
        inserted[2],
        "print(answer * 2)",
    ]
