"""The jupyter_server extension behind the JupyterLab sidebar (``labextension/``).

It serves reads across notebooks (pending questions, memory, knowledge bases, traces) and
answers to pending questions under ``/deeptutor/api/...``. It reads the learner's store and
answers through the same ``InteractionCoordinator.submit`` every other surface uses; it never
imports the kernel side (tests/test_layering.py checks it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from deeptutor_jupyter.config import SERVER_ROOT_ENV
from deeptutor_jupyter.server.routes import setup_handlers

__all__ = ["_load_jupyter_server_extension", "setup_handlers"]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    setup_handlers(serverapp.web_app)
    # Kernels this server starts inherit its environment: a panel attachment is then read only
    # under the folder it serves, whatever notebook_path the browser sends (kernel/attachments.py).
    root = getattr(serverapp, "root_dir", "") or os.getcwd()
    os.environ[SERVER_ROOT_ENV] = str(Path(root).expanduser().resolve())
    serverapp.log.info("deeptutor-jupyter: sidebar API at /deeptutor/api/")
