"""The jupyter_server extension behind the JupyterLab sidebar (``labextension/``).

It serves reads across notebooks (pending questions, memory, knowledge bases, traces) and
answers to pending questions under ``/deeptutor/api/...``. It reads the learner's store and
answers through the same ``InteractionCoordinator.submit`` every other surface uses; it never
imports the kernel side (tests/test_layering.py checks it).
"""

from __future__ import annotations

from typing import Any

from deeptutor_jupyter.server.routes import setup_handlers

__all__ = ["_load_jupyter_server_extension", "setup_handlers"]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    setup_handlers(serverapp.web_app)
    serverapp.log.info("deeptutor-jupyter: sidebar API at /deeptutor/api/")
