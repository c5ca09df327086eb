"""The panel's Regenerate and Delete (kernel/comm.py actions ``regenerate`` and ``delete``) as
calls into the notebook's ``TutorSession`` (runtime/session_edits.py): the same session a
``%tutor`` cell asks, so the next cell continues from the regenerated answer and never sees a
deleted conversation. Each returns what to follow, or ``(code, words)`` when refused."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.runtime.events import EventLog

Refusal = tuple[str, str]


def regenerate(tutor: KernelTutor, turn_id: str, cell: str, no_model: str) -> EventLog | Refusal:
    """``cell`` names where the new turn shows (the panel), ``no_model`` what to say when no
    model is configured (kernel/comm.py's words for an ask)."""
    from deeptutor_jupyter.runtime.plan import PlanError
    from deeptutor_jupyter.runtime.session_edits import EditRefused

    session = tutor.session
    resolved = session.resolve({})
    if not resolved.ready:
        return "not_started", no_model
    place = {"notebook": Path(session.notebook).name, "cell": cell}
    try:
        return session.regenerate(turn_id, resolved, place).log
    except EditRefused as exc:
        return exc.code, str(exc)
    except PlanError as exc:
        return "not_started", str(exc)


def delete(tutor: KernelTutor, conversation: str) -> Refusal | None:
    """Called once the session's store is open (kernel/comm.py ``open_store``)."""
    from deeptutor_jupyter.runtime.session_edits import EditRefused

    try:
        tutor.session.delete_conversation(conversation)
    except EditRefused as exc:
        return exc.code, str(exc)
    return None
