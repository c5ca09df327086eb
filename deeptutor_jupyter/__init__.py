"""deeptutor-jupyter: a tutor that runs inside the notebook's kernel.

``%load_ext deeptutor_jupyter`` registers ``%tutor`` / ``%%tutor``. Loading stays light: nothing
heavy (httpx, pydantic models of the runtime, ipywidgets) is imported until the first turn.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0.dev0"
__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension", "wait_for_turns"]


def load_ipython_extension(ipython: Any) -> None:
    from deeptutor_jupyter.kernel.magics import register

    register(ipython)


async def wait_for_turns(timeout: float = 120.0) -> list[Any]:
    """Wait in a notebook cell (``await wait_for_turns()``) until this kernel's turns finish.

    Returns every turn this kernel started, oldest first; each has ``.status`` and ``.answer``.
    Awaiting keeps the kernel loop running, so the turns progress while the cell waits.
    """
    from deeptutor_jupyter.kernel.magics import current_tutor

    tutor = current_tutor()
    if tutor is None:
        raise RuntimeError("Run %load_ext deeptutor_jupyter first.")
    return await tutor.wait(timeout)


def unload_ipython_extension(ipython: Any) -> None:
    from deeptutor_jupyter.kernel.magics import unregister

    unregister(ipython)
