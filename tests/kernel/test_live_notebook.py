"""read_notebook reads the notebook on screen when the labextension answers over the comm, and
the saved file otherwise, saying which. The frontend is played here by a fake comm; the real
kernel and the real labextension are in tests/e2e/test_notebook_context.py and
tests/ui/test_live_notebook_lab.py."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nbformat
import pytest

from deeptutor_jupyter.kernel import live_notebook
from deeptutor_jupyter.kernel.comm_messages import LIVE_MAX_CELLS, LIVE_SOURCE_CHARS, LIVE_TARGET
from deeptutor_jupyter.kernel.live_notebook import cells_on_screen, read_reply
from deeptutor_jupyter.kernel.notebook_context import ReadNotebookArgs, ReadNotebookTool
from deeptutor_jupyter.tools.base import ToolContext


class FakeFrontend:
    """The comm the kernel opens, with the labextension at its other end."""

    def __init__(self, answer: Any = None) -> None:
        self.answer = answer  # reply(request_id) -> the data the frontend sends, or None
        self.opened: list[dict[str, Any]] = []
        self.closed = False
        self.on_msg_callback: Any = None
        self.on_close_callback: Any = None
        self.errors: list[Exception] = []

    def __call__(self, target_name: str, primary: bool) -> FakeFrontend:
        assert target_name == LIVE_TARGET and primary is False
        return self

    def on_msg(self, callback: Any) -> None:
        self.on_msg_callback = callback

    def on_close(self, callback: Any) -> None:
        self.on_close_callback = callback

    def open(self, data: dict[str, Any]) -> None:
        assert self.on_msg_callback is not None, "a reply could come before the handler"
        self.opened.append(data)
        if self.answer is not None:
            # From another thread, as a comm message handled on a kernel subshell is, once the
            # kernel waits for it.
            reply = self.answer(data["request_id"])
            thread = threading.Thread(target=self.send, args=(reply,))
            asyncio.get_running_loop().call_soon(thread.start)

    def send(self, data: Any) -> None:
        try:
            self.on_msg_callback({"content": {"data": data}})
        except Exception as exc:  # the kernel's handler failed on this thread
            self.errors.append(exc)

    def close(self) -> None:
        self.closed = True


def cell(source: str, **fields: Any) -> dict[str, Any]:
    return {"cell_type": "code", "source": source, "source_length": len(source), **fields}


def on_screen(*cells: dict[str, Any]) -> Any:
    return lambda request_id: {"request_id": request_id, "cells": list(cells), "total_cells": 2}


@pytest.fixture
def saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "lesson.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("evens = None")]
    nbformat.write(nb, path)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    return path


def read(frontend: FakeFrontend, monkeypatch: pytest.MonkeyPatch, seconds: float = 5) -> Any:
    import comm

    monkeypatch.setattr(comm, "create_comm", frontend)
    monkeypatch.setattr(live_notebook, "REPLY_SECONDS", seconds)
    shell = SimpleNamespace(kernel=SimpleNamespace(comm_manager=object()), user_ns={})
    tool = ReadNotebookTool(shell)
    ctx = ToolContext(session_id="s", turn_id="t", workspace=Path.cwd())
    # In debug mode asyncio refuses a future settled from the frontend's thread directly (the
    # loop would sleep on until its timeout): the frontend's thread records the error.
    result = asyncio.run(tool.run(ReadNotebookArgs(), ctx), debug=True)
    assert frontend.errors == []
    return result


def test_the_cells_on_screen_are_read_with_their_outputs(
    saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edited = "evens = [n for n in range(10) if n % 2 == 0]\nprint(evens)"
    frontend = FakeFrontend(
        on_screen(
            {"cell_type": "markdown", "source": "# Evens", "source_length": 7},
            cell(edited, execution_count=3, outputs="[0, 2, 4, 6, 8]\n", tags=["exercise"]),
        )
    )
    result = read(frontend, monkeypatch)
    assert "from the notebook on screen (unsaved changes included) (2 cells)" in result.content
    assert "[cell 1] (code, ran as [3], tags: exercise)\n" + edited in result.content
    assert "Output:\n[0, 2, 4, 6, 8]" in result.content
    assert "evens = None" not in result.content  # the saved file was not read
    assert result.summary == "2 cells from the notebook on screen (unsaved changes included)"
    assert frontend.closed  # one comm per request, closed once answered


def test_no_answer_reads_the_saved_file_and_says_so(
    saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frontend = FakeFrontend()  # nbconvert, a plain kernel: nobody answers
    result = read(frontend, monkeypatch, seconds=0.2)
    assert "Notebook cells from the saved file lesson.ipynb (1 cells)" in result.content
    assert "not included: the notebook on screen did not answer within 0.2 s" in result.content
    assert "evens = None" in result.content
    assert result.summary == "1 cells from the saved file lesson.ipynb"
    assert frontend.closed


def test_a_frontend_without_the_extension_closes_the_comm_and_is_not_waited_for() -> None:
    frontend = FakeFrontend()
    shell = SimpleNamespace(kernel=SimpleNamespace(comm_manager=object()))

    async def ask() -> Any:
        task = asyncio.ensure_future(cells_on_screen(shell, timeout=30, create=frontend))
        while not frontend.opened:
            await asyncio.sleep(0)
        frontend.on_close_callback({})  # JupyterLab closes a comm whose target it lacks
        return await asyncio.wait_for(task, 5)

    start = time.monotonic()
    screen = asyncio.run(ask())
    assert screen.cells is None and screen.problem == live_notebook.NO_FRONTEND
    assert time.monotonic() - start < 5


def test_a_reply_to_another_request_is_ignored_and_a_late_one_is_harmless() -> None:
    frontend = FakeFrontend()
    shell = SimpleNamespace(kernel=SimpleNamespace(comm_manager=object()))

    async def ask() -> Any:
        task = asyncio.ensure_future(cells_on_screen(shell, timeout=5, create=frontend))
        while not frontend.opened:
            await asyncio.sleep(0)
        request_id = frontend.opened[0]["request_id"]
        frontend.send({"request_id": "someone-else", "cells": [], "total_cells": 0})
        frontend.send("not even a dict")
        await asyncio.sleep(0.05)
        assert not task.done()
        frontend.send(on_screen(cell("x = 1"))(request_id))
        screen = await task
        frontend.send(on_screen(cell("late"))(request_id))  # after the answer: dropped
        await asyncio.sleep(0.01)
        return screen

    screen = asyncio.run(ask())
    assert [c.source for c in screen.cells] == ["x = 1"]


def test_a_cell_is_sent_as_long_as_read_notebook_shows_it() -> None:
    from deeptutor_jupyter.kernel.notebook_context import CELL_CHARS

    assert LIVE_SOURCE_CHARS == CELL_CHARS


def test_no_kernel_no_question() -> None:
    screen = asyncio.run(cells_on_screen(SimpleNamespace()))
    assert screen.cells is None and screen.problem == live_notebook.NO_FRONTEND


@pytest.mark.parametrize(
    ("cells", "where"),
    [
        ([cell("x" * (LIVE_SOURCE_CHARS + 1))], "cells.0.source"),
        ([cell("x")] * (LIVE_MAX_CELLS + 1), "cells"),
        ([cell("x", outputs="o" * 10_000)], "cells.0.outputs"),
        ([cell("x", tags=["t"] * 50)], "cells.0.tags"),
        ([cell("x", execution_count="three")], "cells.0.execution_count"),
        ([{"cell_type": "widget", "source": "", "source_length": 0}], "cells.0.cell_type"),
        ([cell("x", script="alert(1)")], "cells.0.script"),
        ("cells", "cells"),
    ],
)
def test_an_oversized_or_malformed_reply_is_refused_in_words(cells: Any, where: str) -> None:
    screen = read_reply({"request_id": "r1", "cells": cells, "total_cells": 1}, "r1")
    assert screen is not None and screen.cells is None
    assert screen.problem.startswith(live_notebook.REFUSED) and f"({where}:" in screen.problem


def test_a_refused_reply_reads_the_saved_file(saved: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    frontend = FakeFrontend(on_screen(cell("x" * (LIVE_SOURCE_CHARS + 1))))
    result = read(frontend, monkeypatch)
    assert "from the saved file lesson.ipynb" in result.content
    assert "sent cells that were refused (cells.0.source:" in result.content
