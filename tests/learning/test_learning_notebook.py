"""notebooks/learning-path/learning_path.ipynb as a student gets it, run end to end.

The checked-in notebook is clean (tests/notebooks checks that); here a scratch copy runs in a real
kernel with nbclient against FakeLLMServer, with cells added where a student would press a button
(Start this path, Submit answers): they go through kernel/learn_api.py, the same doors.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.e2e.kernel_driver import shown_text
from tests.notebooks.test_notebooks import nothing_configured

pytestmark = pytest.mark.e2e

NOTEBOOK = (
    Path(__file__).resolve().parents[2] / "notebooks" / "learning-path" / "learning_path.ipynb"
)

QUIZ = {
    "title": "Eigenvalues, check 1",
    "objective": "eigenvalues",
    "questions": [
        {
            "id": "q1",
            "kind": "choice",
            "prompt": "If $A v = 3 v$ with $v \\neq 0$, what is $3$?",
            "options": [
                {"id": "a", "label": "an eigenvector of A"},
                {"id": "b", "label": "an eigenvalue of A"},
                {"id": "c", "label": "the determinant of A"},
                {"id": "d", "label": "the trace of A"},
            ],
            "answer": ["b"],
            "explanation": "A scalar with A v = λ v for some v ≠ 0 is an eigenvalue.",
        },
        {"id": "q2", "kind": "numeric", "prompt": "Largest eigenvalue of diag(2, 5)?", "answer": 5},
        {
            "id": "q3",
            "kind": "code",
            "prompt": "Write `trace(m)`.",
            "starter": "def trace(m):\n    ...",
            "tests": "assert trace([[2, 0], [0, 5]]) == 7",
        },
    ],
}
ANSWERS = {
    "q1": ["b"],
    "q2": "5",
    "q3": "def trace(m):\n    return sum(m[i][i] for i in range(len(m)))",
}

AFTER = {
    "%tutor learn Linear algebra": "from deeptutor_jupyter.kernel.learn_api import confirm_path\n"
    "print('path', confirm_path())",
    "%tutor learn": "import deeptutor_jupyter\n"
    "from deeptutor_jupyter.kernel.learn_api import submit_quiz, wait_for_quiz\n"
    "quiz = await wait_for_quiz()\n"
    f"grade = await submit_quiz(quiz['id'], {ANSWERS!r})\n"
    "print('quiz', grade.score, [r.correct for r in grade.results])\n"
    "_ = await deeptutor_jupyter.wait_for_turns()",
    "%tutor review --all": "review = await wait_for_quiz()\n"
    "grade = await submit_quiz(review['id'], {'r1': ['b'], 'r2': '4'})\n"
    "print('review', grade.score, [r.correct for r in grade.results])",
}


def text_of(cell: Any) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", ""))
        parts.append(shown_text(out.get("data", {})))
    return "".join(parts)


def learning_notebook(tmp_path: Path) -> tuple[Path, nbformat.NotebookNode]:
    """A scratch copy of the notebook's folder, with the cells a student's clicks stand for."""
    work = tmp_path / "learning-path"
    shutil.copytree(NOTEBOOK.parent, work)
    nb = nbformat.read(work / NOTEBOOK.name, as_version=4)
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        if cell.cell_type == "code" and cell.source in AFTER:
            cells.append(nbformat.v4.new_code_cell(AFTER[cell.source]))
    nb.cells = cells
    return work, nb


def learning_replies() -> list[Reply]:
    return [
        Reply(text="Eigenvalues first.", tool_calls=[ToolCallSpec("make_quiz", QUIZ, id="call_1")]),
        Reply(text="All three right: on to eigenvectors."),
    ]


def run_learning_notebook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, nbformat.NotebookNode, list[dict[str, Any]]]:
    """A scratch copy of the notebook run end to end: its folder, the run notebook (outputs as
    a frontend saves them) and the requests the model received."""
    nothing_configured(tmp_path, monkeypatch)
    work, nb = learning_notebook(tmp_path)
    with FakeLLMServer(learning_replies()) as server:
        monkeypatch.setenv("DEEPTUTOR_PROVIDER", "custom")
        monkeypatch.setenv("DEEPTUTOR_BASE_URL", server.url)
        monkeypatch.setenv("DEEPTUTOR_MODEL", "fake-model")
        client = NotebookClient(
            nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(work)}}
        )
        client.execute()
        requests = [r.body for r in server.requests]
    return work, nb, requests


def test_the_learning_notebook_walks_a_path_a_quiz_and_a_review(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, nb, requests = run_learning_notebook(tmp_path, monkeypatch)
    out = {c.source.splitlines()[0]: text_of(c) for c in nb.cells if c.cell_type == "code"}
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    assert "path saved" in out["from deeptutor_jupyter.kernel.learn_api import confirm_path"]
    assert "quiz 1.0 [True, True, True]" in out["import deeptutor_jupyter"]
    # The path came from TUTOR.md; the teaching turn's prompt knows where the learner stands.
    system = json.dumps(requests[0]["messages"][0])
    assert "[open] eigenvalues" in system and "[locked] eigenvectors" in system
    tool = [m for m in requests[1]["messages"] if m.get("tool_call_id") == "call_1"]
    assert json.loads(tool[0]["content"])["score"] == 1.0
    progress = out["%tutor progress"]
    assert "| ✓ | Eigenvalues" in progress and "| ▶ | Eigenvectors" in progress
    assert "review 0.333 [True, False, False]" in out["review = await wait_for_quiz()"]
    # The review answered from code is saved graded, by the same door as its Submit (issue 20).
    review = out["%tutor review --all"]
    assert "score 33%" in review and "open the notebook with its kernel" not in review
