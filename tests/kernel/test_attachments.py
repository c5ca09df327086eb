"""What the panel attaches to a question, read in the kernel (kernel/attachments.py): a cell by
the number the learner sees, a file under the server's root only, text only, bounded."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from deeptutor_jupyter.kernel.attachments import (
    FILE_CHARS,
    AttachmentError,
    resolve,
    server_root,
)
from deeptutor_jupyter.kernel.comm_messages import AskAction, BadAction, parse_action


def attachments(*items: dict[str, object]) -> AskAction:
    action = parse_action({"action": "ask", "question": "Why?", "attachments": list(items)})
    assert isinstance(action, AskAction)
    return action


def read(
    *items: dict[str, object],
    shell: object = None,
    errors: dict[int, str] | None = None,
    notebook_path: str = "week1/lesson.ipynb",
) -> list[object]:
    shell = shell or SimpleNamespace(user_ns={"In": [""], "Out": {}})
    return list(
        resolve(
            attachments(*items).attachments,
            shell=shell,
            cell_errors=errors,
            notebook_path=notebook_path,
        )
    )


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A server root with the notebook in week1/; the kernel runs in the notebook's folder."""
    (tmp_path / "week1").mkdir()
    monkeypatch.chdir(tmp_path / "week1")
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    return tmp_path


def test_a_cell_is_the_one_the_learner_sees_as_n(root: Path) -> None:
    shell = SimpleNamespace(user_ns={"In": ["", "a = 1", "b = a / 0", "c = 3"], "Out": {}})
    errors = {2: "ZeroDivisionError: division by zero"}
    (card,) = read({"kind": "cell", "number": 2, "source": "stale"}, shell=shell, errors=errors)
    assert card.name == "read_cell"  # type: ignore[attr-defined]
    content = card.content  # type: ignore[attr-defined]
    assert "Cell [2]" in content and "b = a / 0" in content
    assert "ZeroDivisionError" in content
    assert "a = 1" not in content and "c = 3" not in content and "stale" not in content
    assert json.loads(card.arguments) == {"cell": 2}  # type: ignore[attr-defined]


def test_a_cell_not_run_here_shows_what_the_browser_shows(root: Path) -> None:
    rule = "\x1b[31m" + "-" * 75 + "\x1b[39m"
    error = rule + "\nIndexError Traceback\n\x1b[31mIndexError\x1b[39m: out"
    (card,) = read({"kind": "cell", "number": 7, "source": "x = [1, 2]\nx[5]", "error": error})
    content = card.content  # type: ignore[attr-defined]
    assert "not run in this kernel" in content and "x[5]" in content
    assert "IndexError Traceback\nIndexError: out" in content
    assert "\x1b" not in content and "-----" not in content


def test_a_cell_number_with_no_cell_and_no_source_is_refused(root: Path) -> None:
    with pytest.raises(AttachmentError, match=r"There is no cell \[9\]") as caught:
        read({"kind": "quote", "text": "fine"}, {"kind": "cell", "number": 9})
    assert caught.value.index == 1


def test_a_file_is_read_relative_to_the_server_root(root: Path) -> None:
    (root / "data").mkdir()
    (root / "data" / "notes.md").write_text("# Rank\nThe rank counts pivots.\n")
    (card,) = read({"kind": "file", "path": "data/notes.md"}, notebook_path="week1/lesson.ipynb")
    assert card.name == "read_file"  # type: ignore[attr-defined]
    assert "The rank counts pivots." in card.content  # type: ignore[attr-defined]
    assert server_root("week1/lesson.ipynb") == root.resolve()


def test_a_deeper_notebook_path_than_the_real_one_reads_nothing(root: Path) -> None:
    # The notebook is week1/lesson.ipynb; twenty made-up folders once moved the root to "/".
    deeper = "/".join(f"d{i}" for i in range(20)) + "/week1/lesson.ipynb"
    with pytest.raises(AttachmentError, match="not where this kernel's notebook is") as caught:
        read({"kind": "file", "path": "etc/passwd"}, notebook_path=deeper)
    assert "root:" not in str(caught.value)
    with pytest.raises(AttachmentError, match="not where this kernel's notebook is"):
        read({"kind": "file", "path": "data/notes.md"}, notebook_path="week2/lesson.ipynb")


def test_the_root_stays_inside_the_folder_the_server_serves(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.config import SERVER_ROOT_ENV

    (root / "notes.md").write_text("pivots")
    monkeypatch.setenv(SERVER_ROOT_ENV, str(root))
    (card,) = read({"kind": "file", "path": "notes.md"}, notebook_path="week1/lesson.ipynb")
    assert "pivots" in card.content  # type: ignore[attr-defined]
    # Folders named like the real ones above the served root: the names match, the root does not.
    real = (root / "week1").resolve()
    above = "/".join(real.parts[1:]) + "/lesson.ipynb"
    with pytest.raises(AttachmentError, match="not where this kernel's notebook is"):
        read({"kind": "file", "path": "etc/passwd"}, notebook_path=above)


def test_without_a_served_folder_the_root_stays_in_the_home_and_never_reaches_slash(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kernel another server started: DEEPTUTOR_SERVER_ROOT is not set.
    from deeptutor_jupyter.config import SERVER_ROOT_ENV

    monkeypatch.delenv(SERVER_ROOT_ENV, raising=False)
    real = (root / "week1").resolve()
    everything = "/".join(real.parts[1:]) + "/lesson.ipynb"  # every folder: the root would be "/"
    with pytest.raises(AttachmentError, match="not where this kernel's notebook is"):
        read({"kind": "file", "path": "etc/passwd"}, notebook_path=everything)
    monkeypatch.setenv("HOME", str(root.parent))  # the notebook in the home: up to it, no higher
    assert server_root(f"{root.name}/week1/lesson.ipynb") == root.parent.resolve()
    with pytest.raises(AttachmentError, match="not where this kernel's notebook is"):
        read({"kind": "file", "path": "x"}, notebook_path=f"{root.parent.name}/{root.name}/week1/a")


@pytest.mark.parametrize("path", ["../outside.txt", "/../outside.txt", "data/../../outside.txt"])
def test_a_file_outside_the_root_is_refused(root: Path, path: str) -> None:
    (root.parent / "outside.txt").write_text("secret plans")
    with pytest.raises(AttachmentError, match="outside the folder Jupyter serves"):
        read({"kind": "file", "path": path}, notebook_path="week1/lesson.ipynb")


@pytest.mark.parametrize("notebook_path", ["../lesson.ipynb", "week1/../../x.ipynb", "/abs.ipynb"])
def test_a_notebook_path_cannot_move_the_root_up(root: Path, notebook_path: str) -> None:
    (root.parent / "outside.txt").write_text("secret plans")
    with pytest.raises(AttachmentError, match="not a notebook path"):
        read({"kind": "file", "path": "outside.txt"}, notebook_path=notebook_path)


def test_a_symlink_out_of_the_root_is_refused(root: Path) -> None:
    (root.parent / "outside.txt").write_text("secret plans")
    (root / "link.txt").symlink_to(root.parent / "outside.txt")
    with pytest.raises(AttachmentError, match="outside"):
        read({"kind": "file", "path": "link.txt"}, notebook_path="week1/lesson.ipynb")


def test_a_binary_file_is_refused_in_words(root: Path) -> None:
    (root / "week1" / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    with pytest.raises(AttachmentError, match="not a text file") as caught:
        read(
            {"kind": "quote", "text": "fine"},
            {"kind": "file", "path": "week1/plot.png"},
            notebook_path="week1/lesson.ipynb",
        )
    assert caught.value.index == 1  # the chip that is wrong, not the whole question


def test_a_refusal_is_in_the_learners_language(root: Path) -> None:
    (root / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    action = attachments({"kind": "file", "path": "plot.png"})
    shell = SimpleNamespace(user_ns={"In": [""]})
    with pytest.raises(AttachmentError, match=r"plot\.png 不是文本文件"):
        resolve(
            action.attachments,
            shell=shell,
            cell_errors=None,
            notebook_path="week1/lesson.ipynb",
            language="zh",
        )


def test_a_missing_file_and_a_folder_are_refused(root: Path) -> None:
    with pytest.raises(AttachmentError, match="There is no file"):
        read({"kind": "file", "path": "nope.txt"})
    with pytest.raises(AttachmentError, match="is a folder"):
        read({"kind": "file", "path": "week1"}, notebook_path="week1/lesson.ipynb")


def test_a_long_file_is_cut_and_says_so(root: Path) -> None:
    lines = [f"line {i}: " + "x" * 40 for i in range(2000)]
    (root / "log.txt").write_text("\n".join(lines))
    (card,) = read({"kind": "file", "path": "log.txt"})
    content = card.content  # type: ignore[attr-defined]
    assert "line 0:" in content and "line 1999" not in content
    assert len(content) < FILE_CHARS + 500
    assert "only the first" in content and "bytes are shown" in content
    assert "first" in card.summary  # type: ignore[attr-defined]


def test_a_notebook_file_is_read_as_cells(root: Path) -> None:
    image = {"output_type": "display_data", "data": {"image/png": "A" * 600_000}, "metadata": {}}
    nb = {
        "cells": [{"cell_type": "code", "source": ["y = 2\n"], "metadata": {}, "outputs": [image]}]
    }
    (root / "other.ipynb").write_text(json.dumps(nb))  # big with its plot, small as cells
    (card,) = read({"kind": "file", "path": "other.ipynb"})
    content = card.content  # type: ignore[attr-defined]
    assert "[cell 0] (code)" in content and "y = 2" in content and "AAAA" not in content


def test_a_quote_is_bounded_and_names_its_cell(root: Path) -> None:
    (card,) = read({"kind": "quote", "text": "np.linalg.matrix_rank(A)\n" * 400, "number": 3})
    content = card.content  # type: ignore[attr-defined]
    assert card.name == "selected_text"  # type: ignore[attr-defined]
    assert content.startswith("I selected this in cell [3]")
    assert "> np.linalg.matrix_rank(A)" in content and "more chars" in content
    assert len(content) < 5000


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "file", "path": ""},
        {"kind": "cell", "number": 0},
        {"kind": "link", "url": "x"},
        {"kind": "quote", "text": ""},
    ],
)
def test_malformed_attachments_are_refused_before_anything_is_read(bad: dict[str, object]) -> None:
    with pytest.raises(BadAction, match="Bad ask message: attachments"):
        parse_action({"action": "ask", "question": "Why?", "attachments": [bad]})
