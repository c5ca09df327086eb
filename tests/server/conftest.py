"""A real jupyter_server (pytest-jupyter's ``jp_serverapp``) with the sidebar extension on, and a
learner's home holding real SQLite rows."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

# pytest-jupyter's fixtures (jp_serverapp, jp_fetch, ...), imported here rather than through
# pytest_plugins, which pytest allows only in the top-level conftest. Its hooks then apply to
# this folder only.
from pytest_jupyter.jupyter_core import *  # noqa: F403
from pytest_jupyter.jupyter_server import *  # noqa: F403

from deeptutor_jupyter.interaction.audit import AuditLog
from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator
from deeptutor_jupyter.interaction.schema import AskUserArgs, payload
from deeptutor_jupyter.store.db import PendingRow, Store


@pytest.fixture(autouse=True)
def _server_root_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The extension sets SERVER_ROOT_ENV in this process at load; put it back afterwards, or a
    later test's kernel would inherit this test's root."""
    from deeptutor_jupyter.config import SERVER_ROOT_ENV

    monkeypatch.setenv(SERVER_ROOT_ENV, "")


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    return {"ServerApp": {"jpserver_extensions": {"deeptutor_jupyter": True}}}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "learner"
    for var in ("DEEPTUTOR_PROVIDER", "DEEPTUTOR_MODEL", "DEEPTUTOR_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DEEPTUTOR_HOME", str(path))
    return path


@pytest.fixture
def store(home: Path) -> Store:
    return Store(home / "state.db")


def ask(
    store: Store,
    notebook: str,
    *,
    session_id: str,
    mode: str = "single",
    owner: str | None = None,
    place: dict[str, str] | None = None,
) -> PendingRow:
    """A question waiting in ``notebook``, saved exactly as the kernel's coordinator saves it
    (with ``owner``, the process whose turn waits on it)."""
    store.ensure_session(session_id, notebook)
    options = [{"id": "safe", "label": "Analyse first"}, {"id": "fast", "label": "Just do it"}]
    args = AskUserArgs.model_validate(
        {"title": f"Which way in {notebook}?", "mode": mode, "options": options}
    )
    now = time.time()
    request_id = f"ask_{session_id[-6:]}{len(store.pending_for(None)):04d}"
    body = payload(
        args,
        request_id=request_id,
        tool_call_id=f"call_{request_id}",
        session_id=session_id,
        expires_at=now + 3600,
    )
    row = PendingRow(
        request_id, session_id, "turn-1", f"call_{request_id}", body, "pending", now,
        now + 3600, None, None, owner, place,
    )  # fmt: skip
    store.add_pending(row, None)
    return row


def owner_coordinator(store: Store, home: Path) -> InteractionCoordinator:
    """The kernel that owns a question: it can continue the turn, so its answers go through."""
    coordinator = InteractionCoordinator(
        store, AuditLog(home / "audit" / "interactions.jsonl"), workspace=home
    )
    coordinator.can_resume = lambda _row: True
    coordinator.on_orphan = lambda _row, _result: None
    return coordinator


@pytest.fixture
def run(jp_asyncio_loop: Any) -> Any:
    """Run a request on the server's own loop. The tests are plain functions on purpose: under
    pytest-asyncio's auto mode an ``async def`` test would run on a second loop and hang.
    The loop is made current because tornado's client looks it up when a request is built."""
    asyncio.set_event_loop(jp_asyncio_loop)
    return jp_asyncio_loop.run_until_complete
