"""The notebook on screen: ask the labextension for the cells it shows, unsaved edits included.

The kernel opens a comm to ``deeptutor.notebook`` (kernel/comm_messages.py ``LIVE_TARGET``) with
a request id; the labextension answers with the cells of the notebook that owns this kernel
(labextension/src/livecells.ts), whether or not the Tutor panel is open. The answer is awaited on
the kernel's loop with a short timeout, so the shell stays free to receive it. Without an answer
(nbconvert, a plain kernel, a frontend without the extension, a reply refused) the caller reads
the saved file, and says why.

Anyone with the notebook open can send anything over a comm: the reply is validated by its
pydantic model (sizes capped), one of another request is ignored, one that comes late finds the
comm closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.kernel.comm_messages import LiveCell

log = logging.getLogger(__name__)

REPLY_SECONDS = 2.0

# What the read says when it fell back to the saved file.
NO_FRONTEND = "no frontend with the tutor extension shows this notebook"
TIMED_OUT = "the notebook on screen did not answer within {seconds:g} s"
REFUSED = "the notebook on screen sent cells that were refused"


@dataclass
class OnScreen:
    """The cells on screen, or why there are none (words for the tool result)."""

    cells: list[LiveCell] | None
    total: int = 0
    problem: str = ""


def opener(shell: Any) -> Callable[..., Any] | None:
    """``comm.create_comm`` when this shell runs in a kernel, else None (a terminal IPython)."""
    if getattr(getattr(shell, "kernel", None), "comm_manager", None) is None:
        return None
    import comm

    return comm.create_comm


async def cells_on_screen(
    shell: Any, timeout: float | None = None, create: Callable[..., Any] | None = None
) -> OnScreen:
    """Ask the frontend for the notebook's cells; never blocks the kernel's loop."""
    timeout = REPLY_SECONDS if timeout is None else timeout
    create = create or opener(shell)
    if create is None:
        return OnScreen(None, problem=NO_FRONTEND)
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[OnScreen] = loop.create_future()
    request_id = uuid.uuid4().hex

    def settle(result: OnScreen) -> None:
        if not answered.done():
            answered.set_result(result)

    def post(result: OnScreen) -> None:
        # Comm messages may be handled on a subshell thread: the future belongs to the loop.
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result)

    def on_msg(msg: dict[str, Any]) -> None:
        result = read_reply((msg.get("content") or {}).get("data"), request_id)
        if result is not None:
            post(result)

    from deeptutor_jupyter.kernel.comm_messages import LIVE_TARGET

    # Not opened yet: the handlers are in place before the frontend can answer.
    channel = create(target_name=LIVE_TARGET, primary=False)
    channel.on_msg(on_msg)
    channel.on_close(lambda msg: post(OnScreen(None, problem=NO_FRONTEND)))
    try:
        channel.open(data={"request_id": request_id})
        return await asyncio.wait_for(answered, timeout)
    except TimeoutError:
        return OnScreen(None, problem=TIMED_OUT.format(seconds=timeout))
    finally:
        with contextlib.suppress(Exception):  # already closed by the frontend
            channel.close()


def read_reply(data: Any, request_id: str) -> OnScreen | None:
    """The cells of a reply to ``request_id``; a refusal in words when it does not validate;
    None when it answers another request (ignored)."""
    from pydantic import ValidationError

    from deeptutor_jupyter.kernel.comm_messages import LiveCellsReply

    if not isinstance(data, dict) or data.get("request_id") != request_id:
        return None
    try:
        reply = LiveCellsReply.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = (".".join(str(p) for p in first["loc"]) or "reply")[:80]
        log.warning("refused the notebook on screen's reply: %s: %s", where, first["msg"])
        return OnScreen(None, problem=f"{REFUSED} ({where}: {first['msg']})")
    return OnScreen(reply.cells, total=max(reply.total_cells, len(reply.cells)))
