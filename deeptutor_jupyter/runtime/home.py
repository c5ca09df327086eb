"""Opening a learner's home: its store, the interaction coordinator and the coordinator's audit.

The kernel's ``TutorSession`` and the server extension open a home through :func:`open_home`
and nothing else, so an answer given in the panel's Pending tab is checked by the same rules
(expiry, workspace of directory answers, audit file) as one given in a cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deeptutor_jupyter.interaction.audit import AuditLog
    from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator
    from deeptutor_jupyter.interaction.owners import Owner
    from deeptutor_jupyter.store.db import Store

AUDIT_FILE = Path("audit") / "interactions.jsonl"


@dataclass
class Home:
    path: Path
    store: Store
    coordinator: InteractionCoordinator
    audit: AuditLog


def open_home(
    home: Path, *, workspace: Path, expiry_seconds: float, owner: Owner | None = None
) -> Home:
    """The store of ``home/state.db`` and a coordinator on it. ``owner`` is the process whose
    turns this coordinator runs (a kernel); the server owns no turn and passes none."""
    from deeptutor_jupyter.interaction.audit import AuditLog
    from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator
    from deeptutor_jupyter.store.db import Store

    store = Store(home / "state.db")
    audit = AuditLog(home / AUDIT_FILE)
    coordinator = InteractionCoordinator(
        store, audit, workspace=workspace, expiry_seconds=expiry_seconds, owner=owner
    )
    return Home(home, store, coordinator, audit)
