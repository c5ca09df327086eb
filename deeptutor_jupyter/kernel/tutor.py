"""What the tutor needs from this kernel, and nothing else: the shell, which cell shows which
turn, and the views. Everything about turns themselves lives in the runtime's ``TutorSession``
(runtime/session.py), which the sidebar, the terminal and the tests drive the same way.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.runtime.session import TutorSession

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.runtime.orchestrator import Turn
    from deeptutor_jupyter.store.db import PendingRow


def notebook_key(user_ns: dict[str, Any] | None = None) -> str:
    """The notebook this kernel serves; the server tells kernels it starts via JPY_SESSION_NAME."""
    name = os.environ.get("JPY_SESSION_NAME") or (user_ns or {}).get("__session__")
    if name:
        return str(name)
    return f"ipython:{os.getcwd()}"


@dataclass
class KernelTutor:
    session: TutorSession
    shell: Any = None
    cell_turns: dict[str, Turn] = field(default_factory=dict)  # cell id -> its latest turn
    last_cell_id: str | None = None
    slots: dict[str, Any] = field(default_factory=dict)  # request id -> where a resumed turn shows
    pending_boxes: dict[str, Any] = field(default_factory=dict)  # request id -> its pending card
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    cell_errors: dict[int, str] = field(default_factory=dict)  # In[N] -> its error (--cell N)
    # How a turn this kernel resumed for an answer given here shows: kernel/start.py's
    # show_resumed, set by the magics (this module imports no view, so views may import it).
    on_resumed: Callable[[KernelTutor, Turn, PendingRow], None] | None = None

    @classmethod
    def for_shell(cls, shell: Any, resolve: Any) -> KernelTutor:
        # Imported on the first turn, not at %load_ext: the tools pull in pydantic.
        def tools() -> list[Any]:
            from deeptutor_jupyter.kernel.notebook_context import kernel_tools

            return list(kernel_tools(shell))

        def instructions(root: Path) -> list[str]:
            from deeptutor_jupyter.kernel.notebook_context import tutor_md_blocks

            return tutor_md_blocks(root)

        session = TutorSession(
            notebook_key(shell.user_ns if shell else None),
            resolve=resolve,
            tools=tools,
            instructions=instructions,
        )
        tutor = cls(session, shell)
        session.on_resumed = tutor.show_resumed
        session.place = tutor.place  # a turn resumed here shows in the cell that answered
        return tutor

    @property
    def language(self) -> str:
        return self.session.language

    @property
    def workspace(self) -> Path:
        return self.session.workspace()

    def open(self, resolved: ResolvedSettings) -> TutorSession:
        self.session.open(resolved)
        return self.session

    def background(self, coro: Any) -> asyncio.Task[Any]:
        """Run work on the kernel loop without blocking the cell; keeps the task alive."""
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def place(self) -> dict[str, Any]:
        """Where a turn started now shows: this notebook, the cell as the learner sees it."""
        # The running cell is the last of In (execution_count may already name the next one).
        history = (getattr(self.shell, "user_ns", None) or {}).get("In")
        count = len(history) - 1 if isinstance(history, list) and len(history) > 1 else None
        return {
            "notebook": Path(self.session.notebook).name,
            "cell": f"[{count}]" if isinstance(count, int) else "",
        }

    def show_resumed(self, turn: Turn, row: PendingRow) -> None:
        if self.on_resumed is not None:
            self.on_resumed(self, turn, row)

    def cancel_cell(self, cell_id: str | None, reason: str) -> None:
        if cell_id and (turn := self.cell_turns.get(cell_id)) is not None:
            turn.cancel(reason)


def has_event_loop() -> bool:
    """True in a kernel; False in a terminal IPython, where cells run without a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def ensure_loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError as exc:
        raise RuntimeError(
            "%tutor needs a running event loop: run it in a Jupyter kernel (ipykernel), "
            "not in a plain terminal IPython."
        ) from exc
