"""Trace bundles in saved notebooks: rebuilding L1 from them, and scrubbing them out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from deeptutor_jupyter.cli import main
from deeptutor_jupyter.memory import TRACE_MIME, MemoryStore
from deeptutor_jupyter.memory.scrub import NotebookError, count_bundles, scrub_notebook

from .conftest import make_record


def turn_output(trace_id: str, **extra: Any) -> Any:
    record = make_record(trace_id, started_at=1_700_000_000.0, **extra)
    return nbformat.v4.new_output(
        "display_data",
        data={"text/markdown": f"**Q** {record.question}", TRACE_MIME: record.model_dump()},
        metadata={TRACE_MIME: {"expanded": False}},
    )


def write_notebook(path: Path, *trace_ids: str, plain: bool = True) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# Fractions — ½ and ¾"))
    for trace_id in trace_ids:
        cell = nbformat.v4.new_code_cell(f"%tutor explain {trace_id}")
        cell.outputs = [turn_output(trace_id)]
        nb.cells.append(cell)
    if plain:
        cell = nbformat.v4.new_code_cell("1 + 1")
        cell.outputs = [
            nbformat.v4.new_output("execute_result", data={"text/plain": "2"}, execution_count=1)
        ]
        nb.cells.append(cell)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_import_twice_gives_one_set_of_traces(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "course"
    write_notebook(folder / "week1.ipynb", "t_1", "t_2")
    write_notebook(folder / "sub" / "week2.ipynb", "t_3", "t_1")  # t_1 copied across notebooks
    write_notebook(folder / ".ipynb_checkpoints" / "week1-checkpoint.ipynb", "t_9")
    (folder / "broken.ipynb").write_text("{not json")
    first = store.import_notebooks(folder)
    assert (first.added, first.skipped_duplicates, first.notebooks) == (3, 1, 3)
    assert len(first.errors) == 1 and "broken.ipynb" in first.errors[0]
    second = store.import_notebooks(folder)
    assert (second.added, second.skipped_duplicates) == (0, 4)
    traces = store.traces()
    assert sorted(r.trace_id for r in traces) == ["t_1", "t_2", "t_3"]
    assert traces[0].notebook.endswith(".ipynb")


def test_import_reads_string_bundles_and_reports_invalid_ones(
    store: MemoryStore, tmp_path: Path
) -> None:
    path = write_notebook(tmp_path / "nb.ipynb", "t_1")
    nb = json.loads(path.read_text())
    bundle = nb["cells"][1]["outputs"][0]["data"]
    bundle[TRACE_MIME] = json.dumps(bundle[TRACE_MIME])
    nb["cells"][1]["outputs"].append({**nb["cells"][1]["outputs"][0]})
    nb["cells"][1]["outputs"][1] = {
        "output_type": "display_data",
        "metadata": {},
        "data": {TRACE_MIME: {"trace_id": "t_2"}},
    }
    path.write_text(json.dumps(nb))
    result = store.import_notebooks(path)
    assert result.added == 1 and "invalid trace bundle" in result.errors[0]


def test_import_of_a_missing_path_says_so(store: MemoryStore, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        store.import_notebooks(tmp_path / "nowhere")


def test_scrub_removes_bundles_and_keeps_a_valid_notebook(tmp_path: Path) -> None:
    src = write_notebook(tmp_path / "nb.ipynb", "t_1", "t_2")
    out = tmp_path / "shared.ipynb"
    assert scrub_notebook(src, out) == 2
    text = out.read_text()
    assert TRACE_MIME not in text
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    output = nb.cells[1].outputs[0]
    assert output["data"] == {"text/markdown": "**Q** question of t_1"}
    assert output["metadata"] == {}
    assert count_bundles(src) == 2  # the source is untouched when -o is given


def test_scrub_changes_nothing_else(tmp_path: Path) -> None:
    # The scrubbed notebook equals the same notebook written without trace bundles, byte for byte.
    with_traces = write_notebook(tmp_path / "a.ipynb", "t_1", "t_2")
    expected_nb = nbformat.read(with_traces, as_version=4)
    for cell in expected_nb.cells:
        for output in cell.get("outputs", []):
            output["data"].pop(TRACE_MIME, None)
            output["metadata"].pop(TRACE_MIME, None)
    expected = tmp_path / "expected.ipynb"
    nbformat.write(expected_nb, expected)
    scrub_notebook(with_traces)
    assert with_traces.read_bytes() == expected.read_bytes()


@pytest.mark.parametrize("indent", [None, 1, 2, 4])
def test_scrub_leaves_a_notebook_without_bundles_byte_identical(
    tmp_path: Path, indent: int | None
) -> None:
    src = write_notebook(tmp_path / "nb.ipynb")
    nb = json.loads(src.read_text())
    src.write_text(json.dumps(nb, indent=indent, ensure_ascii=indent == 2) + "\r\n" * (indent == 4))
    original = src.read_bytes()
    out = tmp_path / "out.ipynb"
    assert scrub_notebook(src, out) == 0
    assert out.read_bytes() == original
    assert scrub_notebook(src) == 0 and src.read_bytes() == original


@pytest.mark.parametrize("indent", [None, 2])
def test_scrub_handles_any_json_layout(tmp_path: Path, indent: int | None) -> None:
    src = write_notebook(tmp_path / "nb.ipynb", "t_1")
    nb = json.loads(src.read_text())
    # The bundle first in "data", and alone in "metadata": both cut cleanly.
    output = nb["cells"][1]["outputs"][0]
    output["data"] = {TRACE_MIME: output["data"][TRACE_MIME], "text/plain": "turn"}
    src.write_text(json.dumps(nb, indent=indent))
    assert scrub_notebook(src) == 1
    nb_after = json.loads(src.read_text())
    nbformat.validate(nbformat.from_dict(nb_after))
    del nb["cells"][1]["outputs"][0]["data"][TRACE_MIME]
    del nb["cells"][1]["outputs"][0]["metadata"][TRACE_MIME]
    assert src.read_text() == json.dumps(nb, indent=indent)


def test_scrub_refuses_what_is_not_a_notebook(tmp_path: Path) -> None:
    path = tmp_path / "x.ipynb"
    path.write_text("[1, 2]")
    with pytest.raises(NotebookError):
        scrub_notebook(path)
    path.write_text('{"cells": [}')
    with pytest.raises(NotebookError):
        scrub_notebook(path)


def test_cli_scrub(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_notebook(tmp_path / "nb.ipynb", "t_1")
    assert main(["scrub", "--check", str(src)]) == 1
    assert "1 trace bundle;" in capsys.readouterr().out
    assert main(["scrub", str(src), "-o", str(tmp_path / "out.ipynb")]) == 0
    assert "removed 1 trace bundle\n" in capsys.readouterr().out
    assert main(["scrub", str(src)]) == 0
    assert main(["scrub", "--check", str(src)]) == 0
    assert main(["scrub", str(src)]) == 0
    assert "no trace bundles; unchanged" in capsys.readouterr().out
    assert main(["scrub", str(tmp_path / "missing.ipynb")]) == 1
    assert "no such file" in capsys.readouterr().err
    assert main(["scrub", str(src), str(src), "-o", "x.ipynb"]) == 2
    assert main([]) == 2


def test_cli_usage_errors_exit_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "deeptutor_jupyter.cli", "scrub"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "NOTEBOOK" in done.stderr
