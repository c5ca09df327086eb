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
DIRTY = "() => window.jupyterapp.shell.currentWidget.context.model.dirty"


@needs_chromium
def test_the_quickstart_is_not_dirty_on_open(lab: str, tmp_path: Path):
    pinned = json.loads(QUICKSTART.read_text())["metadata"]["language_info"]["version"]
    if pinned != platform.python_version():
        # JupyterLab records the kernel's own Python version, which then differs from the file.
        pytest.skip(f"the notebooks are saved for Python {pinned}")
    shutil.copy(QUICKSTART, tmp_path / "quickstart.ipynb")
    with lab_page("quickstart-open") as page:
        open_notebook(page, lab, "quickstart.ipynb")
        page.wait_for_timeout(2000)  # the kernel's language_info has arrived by now
        assert page.evaluate(DIRTY) is False
