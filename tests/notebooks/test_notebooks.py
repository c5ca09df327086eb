"""The notebooks in notebooks/ as a student gets them: clean files, and they run end to end.

Each is executed in a real kernel with nbclient from a scratch copy (the checked-in file is never
written). The quickstart uses its own ``%tutor demo``; the exercise runs against FakeLLMServer,
as a student's real model would answer it, and the request shows the teacher's TUTOR.md.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.e2e.kernel_driver import shown_text

pytestmark = pytest.mark.e2e

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ALL = sorted(NOTEBOOKS.rglob("*.ipynb"))


@pytest.fixture
def student_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A machine with nothing configured: no model, no key, an empty DEEPTUTOR_HOME."""
    nothing_configured(tmp_path, monkeypatch)
    yield tmp_path


def nothing_configured(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No tutor setting or key from this machine; a home and IPython folder under ``root``."""
    for name in list(os.environ):
        if name.startswith("DEEPTUTOR_") or name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DEEPTUTOR_HOME", str(root / "home"))
    monkeypatch.setenv("DEEPTUTOR_AUTO_CONSOLIDATE", "false")
    monkeypatch.setenv("IPYTHONDIR", str(root / "ipython"))


WAIT = "import deeptutor_jupyter\n\n_ = await deeptutor_jupyter.wait_for_turns()"


def run(source: Path, workdir: Path) -> nbformat.NotebookNode:
    target = workdir / source.relative_to(NOTEBOOKS)
    shutil.copytree(source.parent, target.parent, dirs_exist_ok=True)
    nb = nbformat.read(target, as_version=4)
    # %tutor returns at once: a last cell waits for the turns before the kernel stops.
    nb.cells.append(nbformat.v4.new_code_cell(WAIT))
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={
        "metadata": {"path": str(target.parent)}
    }).execute()  # fmt: skip
    return nb


def text_of(cell: Any) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", ""))
        parts.append(shown_text(out.get("data", {})))
    return "".join(parts)


@pytest.mark.parametrize("path", ALL, ids=[str(p.relative_to(NOTEBOOKS)) for p in ALL])
def test_the_checked_in_file_is_clean(path: Path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert (nb.nbformat, nb.nbformat_minor) == (4, 5)  # cell ids: JupyterLab adds none on open
    raw = path.read_text(encoding="utf-8")
    for cell in nb.cells:
        assert cell.get("id"), "every cell has its id"
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source
    for plumbing in ("NBVAL", "FakeLLMServer", "deeptutor_jupyter.testing", "TUTOR_QUICKSTART"):
        assert plumbing not in raw
    assert nb.metadata["kernelspec"]["name"] == "python3"
    # All that ipykernel reports, so opening it changes nothing but a different Python's version.
    assert set(nb.metadata["language_info"]) == {
        "codemirror_mode", "file_extension", "mimetype", "name", "nbconvert_exporter",
        "pygments_lexer", "version",
    }  # fmt: skip
    assert not list(NOTEBOOKS.rglob("conftest.py"))


def test_the_quickstart_runs_on_its_offline_demo(student_env: Path):
    nb = run(NOTEBOOKS / "quickstart.ipynb", student_env)
    cells = {c.source.splitlines()[0]: c for c in nb.cells if c.cell_type == "code"}
    assert "not a real model" in text_of(cells["%tutor demo"])
    printed = text_of(cells["from deeptutor_jupyter import wait_for_turns"])
    assert printed.count("done | _(demo reply: scripted, not a real model)_") == 2
    assert printed.index("**eigenvector**") < printed.index("the eigenvalue is $7$")
    assert "%tutor demo [off]" in text_of(cells["%tutor help"])
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    # The demo kept its own scratch home: nothing landed in the student's.
    assert not (student_env / "home" / "state.db").exists()


def test_the_exercise_runs_and_the_tutor_gets_the_teachers_instructions(
    student_env: Path, monkeypatch: pytest.MonkeyPatch
):
    with FakeLLMServer([Reply(text="The first one filters; the second one replaces.")]) as server:
        monkeypatch.setenv("DEEPTUTOR_PROVIDER", "custom")
        monkeypatch.setenv("DEEPTUTOR_BASE_URL", server.url)
        monkeypatch.setenv("DEEPTUTOR_MODEL", "fake-model")
        nb = run(NOTEBOOKS / "list-comprehensions" / "exercise.ipynb", student_env)
        checks = [text_of(c) for c in nb.cells if c.source.startswith("if ")]
        assert [c.strip()[:7] for c in checks] == ["Not yet", "Not yet"]  # unsolved as handed out
        assert [c.metadata.get("tags") for c in nb.cells if "None  #" in c.source] == [
            ["exercise"],
            ["exercise"],
        ]
        [request] = [r.body for r in server.requests]
    system = json.dumps(request["messages"][0])
    assert "Never write the solution of a cell tagged `exercise`" in system
    assert "difference between [x for x in xs if x > 0]" in request["messages"][-1]["content"]


def test_lab_sh_opens_a_working_copy_and_never_the_tracked_notebook(tmp_path: Path) -> None:
    """JupyterLab autosaves what it opens: scripts/lab.sh opens copies in my-notebooks/, made
    once (the learner's edits stay), so the tracked notebooks/ never change. Run against a
    scratch root whose setup.sh and jupyter only report (installing and serving is not the
    point here)."""
    import subprocess

    repo = Path(__file__).resolve().parents[2]
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(repo / "scripts" / "lab.sh", root / "scripts" / "lab.sh")
    shutil.copytree(repo / "notebooks", root / "notebooks")
    (root / "scripts" / "setup.sh").write_text("#!/bin/sh\n")
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "jupyter").write_text('#!/bin/sh\necho "$PWD" "$@"\n')
    for stub in (root / "scripts" / "setup.sh", root / ".venv" / "bin" / "jupyter"):
        stub.chmod(0o755)
    tracked = (root / "notebooks" / "quickstart.ipynb").read_bytes()

    def launch() -> list[str]:
        done = subprocess.run(
            ["bash", str(root / "scripts" / "lab.sh")], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    work = root / "my-notebooks"
    assert launch()[:3] == [str(work), "lab", "quickstart.ipynb"]
    assert (work / "quickstart.ipynb").read_bytes() == tracked
    assert (work / "list-comprehensions" / "exercise.ipynb").is_file()
    (work / "quickstart.ipynb").write_text("the learner's own work")  # autosave, or the learner
    launch()
    assert (work / "quickstart.ipynb").read_text() == "the learner's own work"
    assert (root / "notebooks" / "quickstart.ipynb").read_bytes() == tracked
