"""The kernel end of cell insertion through JupyterLab (the lab end is labextension/src/cells.ts).

When the notebook is open in JupyterLab, the tutor's cells go into the notebook model there,
as if typed: undo works, the learner's unsaved edits stay, and no file is written under them.
The protocol (docs/book.md#how-cells-are-written):

1. the kernel opens a comm ``deeptutor.cells`` (``{"request", "notebook"}``): an announcement
   every frontend of the kernel receives;
2. a JupyterLab with that notebook open answers by opening ``deeptutor.cells.reply``
   (``{"request", "client"}``), a claim;
3. the first claim gets ``{"op": "insert", "cells", "after", "index"}`` (or ``{"op": "edit",
   "cell_id", "source"}``), later ones are closed: two tabs on one notebook never act twice;
4. the claimant acts and answers ``{"op": "done", "ids"}`` (or ``{"op": "error"}``).

No claim within ``CLAIM_SECONDS``: no JupyterLab has the notebook, ``FrontendUnavailable``, and
cells/__init__.py writes the file instead. A claim whose insertion is not confirmed is an error,
never a second insertion in the file. Claims arrive as comm messages, maybe on a subshell
thread: every state change is posted to the loop that asked. Imported at ``%load_ext`` to
register the reply target, so it imports nothing heavy at module level.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.cells import NewCell

ANNOUNCE = "deeptutor.cells"
REPLY = "deeptutor.cells.reply"
CLAIM_SECONDS = 3.0
DONE_SECONDS = 20.0


@dataclass
class _Request:
    loop: asyncio.AbstractEventLoop
    message: dict[str, Any]
    claimed: asyncio.Future[Any]
    done: asyncio.Future[dict[str, Any]]
    replies: list[Any] = field(default_factory=list)


_requests: dict[str, _Request] = {}


def register(ipython: Any) -> bool:
    """Register the reply target on the kernel (at ``%load_ext``); False without a kernel."""
    manager = getattr(getattr(ipython, "kernel", None), "comm_manager", None)
    if manager is None:
        return False
    manager.register_target(REPLY, _on_reply)
    return True


def unregister(ipython: Any) -> None:
    manager = getattr(getattr(ipython, "kernel", None), "comm_manager", None)
    if manager is not None and REPLY in manager.targets:
        manager.unregister_target(REPLY, manager.targets[REPLY])


def _on_reply(comm: Any, msg: dict[str, Any]) -> None:
    data = msg.get("content", {}).get("data", {}) or {}
    request = _requests.get(str(data.get("request", "")))
    if request is None:
        comm.close({"op": "unknown"})
        return
    request.loop.call_soon_threadsafe(_claim, request, comm)


def _claim(request: _Request, comm: Any) -> None:
    if request.claimed.done():
        comm.close({"op": "taken"})  # another tab of this notebook inserts
        return
    request.replies.append(comm)

    def on_msg(msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data", {}) or {}
        request.loop.call_soon_threadsafe(_finish, request, data)

    comm.on_msg(on_msg)
    request.claimed.set_result(comm)
    comm.send(request.message)


def _finish(request: _Request, data: dict[str, Any]) -> None:
    if not request.done.done():
        request.done.set_result(data)


class LabFrontend:
    """``cells.Frontend`` through the JupyterLab that has ``notebook`` open."""

    def __init__(self, notebook: str) -> None:
        self.notebook = notebook

    async def insert(
        self, cells: Sequence[NewCell], *, after: str | None, index: int | None
    ) -> list[str]:
        from deeptutor_jupyter.cells import to_json

        cells_json = [to_json(c, with_id=False) for c in cells]
        message = {"op": "insert", "cells": cells_json, "after": after, "index": index}
        return await self._ask(message, "insert the cells")

    async def edit(self, cell_id: str, source: str) -> list[str]:
        """Set the source of the learner's cell ``cell_id`` in the open notebook (confirmed by
        the caller: cells.edit_cell)."""
        return await self._ask({"op": "edit", "cell_id": cell_id, "source": source}, "edit it")

    async def is_open(self) -> bool:
        """Whether a JupyterLab has the notebook open (in any kernel): a file written under it
        would conflict with the learner's next save."""
        from deeptutor_jupyter.cells import FrontendUnavailable

        try:
            await self._ask({"op": "probe"}, "say whether it has the notebook open")
        except FrontendUnavailable:
            return False
        return True

    async def _ask(self, message: dict[str, Any], what: str) -> list[str]:
        from comm import create_comm

        from deeptutor_jupyter.cells import CellError, FrontendUnavailable

        loop = asyncio.get_running_loop()
        key = secrets.token_hex(8)
        request = _Request(loop, message, loop.create_future(), loop.create_future())
        _requests[key] = request
        announce = create_comm(
            target_name=ANNOUNCE, data={"request": key, "notebook": self.notebook}
        )
        try:
            try:
                await asyncio.wait_for(asyncio.shield(request.claimed), CLAIM_SECONDS)
            except TimeoutError:
                raise FrontendUnavailable("No JupyterLab has this notebook open.") from None
            try:
                answer = await asyncio.wait_for(asyncio.shield(request.done), DONE_SECONDS)
            except TimeoutError:
                raise CellError(
                    f"JupyterLab was asked to {what} but did not confirm; look at the notebook "
                    "before asking again (nothing was written to the file)."
                ) from None
            if answer.get("op") != "done":
                raise CellError(f"JupyterLab could not {what}: {answer.get('message')}")
            return [str(i) for i in answer.get("ids", [])]
        finally:
            del _requests[key]
            announce.close()
            for reply in request.replies:
                reply.close()
