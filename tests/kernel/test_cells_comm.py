"""The kernel end of cell insertion through JupyterLab (kernel/cells_comm.py), in-process: the
first claim inserts and a second tab's claim is turned away (no cell twice); no claim means no
JupyterLab, so the file path is used; a claim never confirmed is an error, never a file write."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from deeptutor_jupyter.cells import CellError, FrontendUnavailable, NewCell
from deeptutor_jupyter.kernel import cells_comm


class FakeComm:
    def __init__(self, **kwargs: Any) -> None:
        self.opened = kwargs
        self.sent: list[dict[str, Any]] = []
        self.closed: dict[str, Any] | None = None
        self.handler: Any = None

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)

    def close(self, data: dict[str, Any] | None = None) -> None:
        self.closed = data or {}

    def on_msg(self, handler: Any) -> None:
        self.handler = handler


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch) -> list[FakeComm]:
    import comm

    made: list[FakeComm] = []

    def create_comm(**kwargs: Any) -> FakeComm:
        made.append(FakeComm(**kwargs))
        return made[-1]

    monkeypatch.setattr(comm, "create_comm", create_comm)
    return made


def claim(request: str, client: str) -> FakeComm:
    reply = FakeComm()
    cells_comm._on_reply(reply, {"content": {"data": {"request": request, "client": client}}})
    return reply


async def until(predicate: Any) -> None:
    while not predicate():
        await asyncio.sleep(0.005)


async def test_the_first_tab_inserts_and_a_second_is_turned_away(announced: list[FakeComm]):
    lab = cells_comm.LabFrontend("week1/lesson.ipynb")
    task = asyncio.create_task(lab.insert([NewCell(source="# Hi")], after="c1", index=None))
    await asyncio.wait_for(until(lambda: announced), 5)
    data = announced[0].opened["data"]
    assert announced[0].opened["target_name"] == "deeptutor.cells"
    assert data["notebook"] == "week1/lesson.ipynb"
    first, second = claim(data["request"], "tab1"), claim(data["request"], "tab2")
    await asyncio.wait_for(until(lambda: first.sent and second.closed is not None), 5)
    assert second.closed == {"op": "taken"} and second.sent == []
    (insert,) = first.sent
    assert insert["op"] == "insert" and insert["after"] == "c1"
    assert insert["cells"][0]["source"] == "# Hi" and "id" not in insert["cells"][0]
    first.handler({"content": {"data": {"op": "done", "ids": ["lab-1"]}}})
    assert await asyncio.wait_for(task, 5) == ["lab-1"]
    assert announced[0].closed is not None and first.closed is not None
    assert cells_comm._requests == {}
    assert claim(data["request"], "late").closed == {"op": "unknown"}


async def test_an_edit_goes_the_same_way_and_a_refusal_is_an_error(announced: list[FakeComm]):
    lab = cells_comm.LabFrontend("lesson.ipynb")
    task = asyncio.create_task(lab.edit("c3", "x = 2"))
    await asyncio.wait_for(until(lambda: announced), 5)
    reply = claim(announced[0].opened["data"]["request"], "tab1")
    await asyncio.wait_for(until(lambda: reply.sent), 5)
    assert reply.sent == [{"op": "edit", "cell_id": "c3", "source": "x = 2"}]
    reply.handler({"content": {"data": {"op": "error", "message": "no cell c3"}}})
    with pytest.raises(CellError, match="could not edit it: no cell c3"):
        await task


async def test_without_a_claim_the_file_is_used_and_without_a_confirmation_it_is_not(
    announced: list[FakeComm], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(cells_comm, "CLAIM_SECONDS", 0.05)
    monkeypatch.setattr(cells_comm, "DONE_SECONDS", 0.05)
    lab = cells_comm.LabFrontend("lesson.ipynb")
    with pytest.raises(FrontendUnavailable):
        await lab.insert([NewCell(source="x")], after=None, index=None)
    task = asyncio.create_task(lab.insert([NewCell(source="x")], after=None, index=None))
    await asyncio.wait_for(until(lambda: len(announced) == 2), 5)
    claim(announced[1].opened["data"]["request"], "tab1")
    with pytest.raises(CellError, match="did not confirm") as caught:
        await task
    assert not isinstance(caught.value, FrontendUnavailable)  # never a second insertion


async def test_a_probe_says_whether_a_jupyterlab_has_the_notebook_open(
    announced: list[FakeComm], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(cells_comm, "CLAIM_SECONDS", 0.05)
    lab = cells_comm.LabFrontend("/home/me/linear-algebra.ipynb")
    assert await lab.is_open() is False
    task = asyncio.create_task(lab.is_open())
    await asyncio.wait_for(until(lambda: len(announced) == 2), 5)
    reply = claim(announced[1].opened["data"]["request"], "tab1")
    await asyncio.wait_for(until(lambda: reply.sent), 5)
    assert reply.sent == [{"op": "probe"}]
    reply.handler({"content": {"data": {"op": "done", "ids": []}}})
    assert await asyncio.wait_for(task, 5) is True
