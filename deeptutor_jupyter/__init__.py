"""deeptutor-jupyter: a tutor that runs inside the notebook's kernel.

``%load_ext deeptutor_jupyter`` registers ``%tutor`` / ``%%tutor``. Loading stays light: nothing
heavy (httpx, pydantic models of the runtime, ipywidgets) is imported until the first turn.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0.dev0"


def load_ipython_extension(ipython: Any) -> None:
    from deeptutor_jupyter.kernel.magics import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from deeptutor_jupyter.kernel.magics import unregister

    unregister(ipython)
