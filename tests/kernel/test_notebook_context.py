"""Reading the notebook file: a damaged one falls back to the input history, never crashes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from deeptutor_jupyter.kernel.notebook_context import notebook_cells, preview, render_cells


@pytest.mark.parametrize("content", ["[1, 2]", '{"cells": 3}', "not json", '{"cells": [5]}'])
def test_a_damaged_notebook_file_falls_back_to_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str
):
    path = tmp_path / "lesson.ipynb"
    path.write_text(content)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    shell = SimpleNamespace(user_ns={"In": ["", "x = 1", "print(x)"]})
    cells, origin = notebook_cells(shell)
    if content == '{"cells": [5]}':
        assert cells == [] and "lesson.ipynb" in origin
    else:
        assert [c["source"] for c in cells] == ["x = 1", "print(x)"]
        assert origin == "this kernel's input history"


def test_rendering_is_bounded():
    cells = [{"type": "code", "source": "x" * 5000, "tags": ["exercise"]}] * 20
    text = render_cells(cells, 0, None)
    assert "tags: exercise" in text and "more chars" in text and len(text) < 21000


def test_a_preview_is_never_a_full_dump():
    info = preview(list(range(100_000)))
    assert info["len"] == 100_000 and len(info["preview"]) < 1600
