"""The quickstart opens in JupyterLab without being marked modified (no cell ids to add, nothing
rewritten), and its first cells run as a student would run them."""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path

import pytest

from tests.ui.test_lab import lab_page, needs_chromium, open_notebook

pytestmark = pytest.mark.ui

QUICKSTART = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"
MODEL = "window.jupyterapp.shell.currentWidget.context.model"
DIRTY = f"() => {MODEL}.dirty"
KERNEL_VERSION = f"({MODEL}.getMetadata('language_info') || {{}}).version"


@needs_chromium
@pytest.mark.parametrize("saved_with", ["as saved", "3.99.1"])
def test_the_quickstart_is_not_dirty_on_open_whatever_python_saved_it(
    lab: str, tmp_path: Path, saved_with: str
):
    """Opened on this kernel's Python as saved, and as if saved under another Python: the
    kernel's language_info replaces the file's (JupyterLab does that) without marking the
    notebook modified; a change of the learner's still does."""
    nb = json.loads(QUICKSTART.read_text())
    if saved_with != "as saved":
        nb["metadata"]["language_info"]["version"] = saved_with
        (tmp_path / "quickstart.ipynb").write_text(json.dumps(nb, indent=1) + "\n")
    else:
        shutil.copy(QUICKSTART, tmp_path / "quickstart.ipynb")
    with lab_page(f"quickstart-open-{saved_with.replace(' ', '-')}") as page:
        open_notebook(page, lab, "quickstart.ipynb")
        page.wait_for_function(
            f"() => {KERNEL_VERSION} === {json.dumps(platform.python_version())}"
        )
        page.wait_for_timeout(500)  # any dirty mark of that update has been set by now
        assert page.evaluate(DIRTY) is False
        page.evaluate(f"() => {MODEL}.setMetadata('deeptutor_test', 1)")
        assert page.evaluate(DIRTY) is True
