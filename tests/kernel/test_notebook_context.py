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


def test_a_traceback_keeps_the_learners_frames_and_names_the_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import json
    import traceback

    from deeptutor_jupyter.kernel.notebook_context import learner_traceback

    monkeypatch.chdir(tmp_path)
    (tmp_path / "helpers.py").write_text("import json\n\ndef load(t):\n    return json.loads(t)\n")
    cell = tmp_path / "ipykernel_1" / "123.py"  # where ipykernel keeps a cell's source
    cell.parent.mkdir()
    cell.write_text(
        "import helpers\ntry:\n    helpers.load('{')\nexcept ValueError as e:\n"
        "    raise KeyError('no config') from e\n"
    )
    code = compile(cell.read_text(), str(cell), "exec")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        exec(code, {})
    except KeyError as exc:
        error = traceback.TracebackException.from_exception(exc)
    shell = SimpleNamespace(compile=SimpleNamespace(_filename_map={str(cell): 7}))
    text = learner_traceback(error, shell)
    assert text.index("JSONDecodeError") < text.index("direct cause") < text.index("KeyError")
    assert "Cell In[7], line 3\n    helpers.load('{')" in text
    assert "File helpers.py, line 4, in load\n    return json.loads(t)" in text
    assert "frames inside json" in text and "Cell In[7], line 5" in text
    assert str(tmp_path) not in text and json.__file__ not in text
