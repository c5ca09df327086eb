"""Cells written safely (issue 26): a notebook changed on disk since the tutor read it is never
overwritten; every write is atomic and keeps a checkpoint of the bytes it replaced; a learner's
cell is changed only with their confirmation."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from deeptutor_jupyter import cells
from deeptutor_jupyter.cells import CellError, NewCell, NotebookChanged
from deeptutor_jupyter.cells.tools import EditCellArgs, EditCellTool
from deeptutor_jupyter.store.db import PendingRow, Store
from deeptutor_jupyter.tools.base import ToolContext, ToolDeps


def notebook(path: Path, sources: Sequence[str] = ("x = 1", "print(x)")) -> bytes:
    nb = cells.notebook_file.empty_notebook()
    nb["cells"] = [
        {
            "id": f"c{i}",
            "cell_type": "code",
            "metadata": {},
            "source": s,
            "outputs": [],
            "execution_count": None,
        }
        for i, s in enumerate(sources)
    ]
    data = json.dumps(nb, indent=1).encode()
    path.write_bytes(data)
    return data


def sources(path: Path) -> list[str]:
    return [c["source"] for c in json.loads(path.read_text())["cells"]]


def test_a_notebook_saved_after_the_read_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "lesson.ipynb"
    notebook(path)
    read = cells.read(path)
    read.cells.append(cells.to_json(NewCell(source="the tutor's cell")))
    # The learner saves their notebook meanwhile, same size and same mtime: only the hash knows.
    mine = path.read_bytes().replace(b"x = 1", b"x = 2")
    stat = path.stat()
    path.write_bytes(mine)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(NotebookChanged, match="saved again after the tutor read it"):
        cells.write_back(read)
    assert path.read_bytes() == mine
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_notebook_deleted_or_created_meanwhile_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "lesson.ipynb"
    notebook(path)
    read = cells.read(path)
    path.unlink()
    with pytest.raises(NotebookChanged, match="deleted or moved"):
        cells.write_back(read)
    assert not path.exists()
    fresh = cells.read(tmp_path / "book.ipynb")  # missing: a new notebook
    notebook(tmp_path / "book.ipynb", ["someone else's"])
    with pytest.raises(NotebookChanged, match="created by someone else"):
        cells.write_back(fresh)
    assert sources(tmp_path / "book.ipynb") == ["someone else's"]


async def test_an_insert_is_atomic_and_keeps_a_checkpoint_of_what_it_replaced(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lesson.ipynb"
    before = notebook(path)
    os.chmod(path, 0o640)
    ids = await cells.insert_cells(
        path, [NewCell(source="# Example"), NewCell(cell_type="code", source="y = 2")], after="c0"
    )
    assert sources(path) == ["x = 1", "# Example", "y = 2", "print(x)"]
    assert cells.checkpoint_path(path).read_bytes() == before
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)  # the learner's mode is kept
    saved = json.loads(path.read_text())["cells"]
    assert [c["id"] for c in saved[1:3]] == ids and len(set(ids)) == 2
    assert saved[2]["outputs"] == [] and saved[2]["execution_count"] is None
    # A second write reads again: it follows the first, never refused by it.
    await cells.insert_cells(path, [NewCell(source="end")])
    assert sources(path)[-1] == "end"


async def test_an_unknown_place_inserts_nothing(tmp_path: Path) -> None:
    path = tmp_path / "lesson.ipynb"
    before = notebook(path)
    with pytest.raises(CellError, match="no cell with id nope"):
        await cells.insert_cells(path, [NewCell(source="x")], after="nope")
    with pytest.raises(CellError, match="cannot insert at 9"):
        await cells.insert_cells(path, [NewCell(source="x")], index=9)
    assert path.read_bytes() == before


class Lab:
    """A frontend double: the real one is the labextension's notebook model."""

    def __init__(self, answers: bool) -> None:
        self.answers = answers
        self.got: list[str] = []

    async def insert(
        self, new: Sequence[NewCell], *, after: str | None, index: int | None
    ) -> list[str]:
        if not self.answers:
            raise cells.FrontendUnavailable("no JupyterLab has this notebook open")
        self.got += [c.source for c in new]
        return ["lab1"]

    async def edit(self, cell_id: str, source: str) -> list[str]:
        if not self.answers:
            raise cells.FrontendUnavailable("no JupyterLab has this notebook open")
        self.got.append(f"{cell_id}: {source}")
        return [cell_id]


async def test_jupyterlab_gets_the_cells_when_it_answers_else_the_file_does(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lesson.ipynb"
    before = notebook(path)
    lab = Lab(answers=True)
    assert await cells.insert_cells(path, [NewCell(source="hi")], frontend=lab) == ["lab1"]
    assert lab.got == ["hi"] and path.read_bytes() == before  # the file is JupyterLab's to save
    await cells.insert_cells(path, [NewCell(source="hi")], frontend=Lab(answers=False))
    assert sources(path)[-1] == "hi"
    confirmed = cells.Confirmed("c0", "r1")  # made by confirmed_edit from the learner's yes
    before = path.read_bytes()
    assert await cells.edit_cell(path, "c0", "x = 3", confirmed, frontend=lab) is None
    assert lab.got[-1] == "c0: x = 3" and path.read_bytes() == before
    await cells.edit_cell(path, "c0", "x = 3", confirmed, frontend=Lab(answers=False))
    assert sources(path)[0] == "x = 3"
    with pytest.raises(CellError, match="for cell c0, not c1"):
        await cells.edit_cell(path, "c1", "y", confirmed, frontend=lab)


def confirmation(store: Store, call_id: str, payload: dict, result: dict | None) -> None:
    now = time.time()
    store.ensure_session("s1", "lesson.ipynb")
    store.add_pending(
        PendingRow(
            f"r-{call_id}", "s1", "t1", call_id, payload, "pending", now, now + 60, None, None
        ),
        None,
    )
    if result is not None:
        store.resolve_pending(f"r-{call_id}", "answered", result, now)


async def test_a_learners_cell_changes_only_with_their_confirmation(tmp_path: Path) -> None:
    path, home = tmp_path / "lesson.ipynb", tmp_path / "home"
    home.mkdir()
    before = notebook(path)
    store = Store(home / "state.db")
    form = {"title": "Change cell c1 to print(x + 1)?", "options": [{"id": "apply"}]}
    confirmation(store, "ask-no", form, {"selections": ["keep"], "cancelled": False})
    confirmation(store, "ask-open", form, None)
    confirmation(store, "ask-other", {"title": "Change cell c0?"}, {"selections": ["apply"]})
    confirmation(store, "ask-yes", form, {"selections": ["apply"], "cancelled": False})
    store.close()
    tool = EditCellTool(lambda: path)
    store = Store(home / "state.db")
    answered = lambda call_id: store.answered_call("s1", call_id)  # noqa: E731 - as the session's
    ctx = ToolContext("s1", "t2", tmp_path, ToolDeps(home=home, answered=answered))

    async def edit(confirm: str) -> str:
        args = EditCellArgs(cell_id="c1", source="print(x + 1)", confirmation=confirm)
        result = await tool.run(args, ctx)
        assert result.is_error == (confirm != "ask-yes"), result.content
        return result.content

    assert "needs their confirmation" in await edit("made-up")
    assert "did not confirm" in await edit("ask-no")
    assert "not answered" in await edit("ask-open")
    assert "does not name cell c1" in await edit("ask-other")
    assert path.read_bytes() == before
    assert "previous version is kept" in await edit("ask-yes")
    assert sources(path) == ["x = 1", "print(x + 1)"]
    assert cells.checkpoint_path(path).read_bytes() == before
    store.close()


async def test_the_insert_tool_writes_through_the_module_and_says_when_it_cannot(
    tmp_path: Path,
) -> None:
    from deeptutor_jupyter.cells.tools import InsertCellsArgs, InsertCellsTool

    path = tmp_path / "lesson.ipynb"
    notebook(path)
    ctx = ToolContext("s1", "t1", tmp_path)
    args = InsertCellsArgs(cells=[NewCell(cell_type="code", source="z = 3")], after="c0")
    done = await InsertCellsTool(lambda: path).run(args, ctx)
    assert not done.is_error and sources(path) == ["x = 1", "z = 3", "print(x)"]
    assert done.data["cell_ids"] and cells.checkpoint_path(path).exists()
    nowhere = await InsertCellsTool(lambda: None).run(args, ctx)
    assert nowhere.is_error and "does not know its notebook file" in nowhere.content
    wrong = await InsertCellsTool(lambda: path).run(
        InsertCellsArgs(cells=args.cells, after="x"), ctx
    )
    assert wrong.is_error and "no cell with id x" in wrong.content


async def test_a_save_made_while_the_tutor_writes_is_not_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The learner saves while the tutor's new bytes are being written (the write is slowed by
    the files module's test hook): the last check, right before the rename, refuses."""
    import asyncio

    from deeptutor_jupyter import _files

    path = tmp_path / "lesson.ipynb"
    notebook(path)
    read = cells.read(path)
    read.cells.append(cells.to_json(NewCell(source="the tutor's cell")))
    monkeypatch.setenv(_files.SLOW_WRITE_ENV, "0.3")
    writing = asyncio.create_task(asyncio.to_thread(cells.write_back, read))

    async def temporary_file() -> None:  # the notebook's own temporary, not the checkpoint's
        while not list(tmp_path.glob(".lesson.ipynb.*.tmp")):
            await asyncio.sleep(0.005)

    await asyncio.wait_for(temporary_file(), 10)
    mine = notebook(path, ["x = 1", "print(x)", "my new cell"])  # the learner's save
    with pytest.raises(NotebookChanged):
        await asyncio.wait_for(writing, 10)
    assert path.read_bytes() == mine
    assert not list(tmp_path.glob(".lesson.ipynb.*.tmp"))
