"""deeptutor-jupyter: a tutor that runs inside the notebook's kernel.

``%load_ext deeptutor_jupyter`` registers ``%tutor`` / ``%%tutor``. Loading stays light: nothing
heavy (httpx, pydantic models of the runtime, ipywidgets) is imported until the first turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.runtime.session import TutorSession

__version__ = "0.1.0.dev0"
from deeptutor_jupyter.errors import DeepTutorError

__all__ = [
    "DeepTutorError",
    "__version__",
    "load_ipython_extension",
    "pending_interactions",
    "submit_user_input",
    "unload_ipython_extension",
    "wait_for_turns",
]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the prebuilt sidebar (built from labextension/ by the wheel)."""
    return [{"src": "labextension", "dest": "deeptutor-jupyter"}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """The sidebar's API (deeptutor_jupyter/server/); enabled by jupyter-config/server-config."""
    return [{"module": "deeptutor_jupyter.server"}]


def load_ipython_extension(ipython: Any) -> None:
    from deeptutor_jupyter.kernel.magics import register

    register(ipython)


async def wait_for_turns(timeout: float = 120.0) -> list[Any]:
    """Wait in a notebook cell (``await wait_for_turns()``) until this kernel's turns finish.

    Returns every turn this kernel started, oldest first; each has ``.status`` and ``.answer``.
    Awaiting keeps the kernel loop running, so the turns progress while the cell waits. When
    turns still run after ``timeout`` seconds it raises ``TurnsStillRunning`` (a
    ``TimeoutError``) whose ``.running`` are those turns and ``.turns`` all of them.
    """
    from deeptutor_jupyter.kernel import warm
    from deeptutor_jupyter.kernel.magics import current_tutor

    warm.wait()
    tutor = current_tutor()
    if tutor is None:
        raise RuntimeError("Run %load_ext deeptutor_jupyter first.")
    return await tutor.session.wait(timeout)


def submit_user_input(
    session_id: str,
    request_id: str,
    selections: list[str] | None = None,
    custom_input: str = "",
    cancelled: bool = False,
) -> dict[str, Any]:
    """Answer a pending ask_user question; the same door the form and the sidebar use.

    The answer becomes the tool result of the question's original tool call and its turn goes
    on. A refused submission raises ``deeptutor_jupyter.interaction.coordinator.InteractionError``
    (``.code``: unknown, foreign_session, duplicate, expired, invalid, not_resumable, store)
    and changes nothing; wrong types (``custom_input=12345``) are ``invalid``. Returns the tool
    result sent to the model.
    """
    session = _opened_session()
    return session.submit(session_id, request_id, selections, custom_input, cancelled).wire()


def pending_interactions(session_id: str | None = None) -> list[dict[str, Any]]:
    """What waits for an answer (of one session, or of every session of the user): questions
    (``interaction`` ``ask_user``, answered with ``submit_user_input``), quizzes and reviews
    (``quiz``, ``review``: their public form, answered with
    ``deeptutor_jupyter.kernel.learn_api.submit_quiz``). Never a quiz's correct answers."""
    session = _opened_session()
    rows = session.pending(all_sessions=True, session_id=session_id)
    return [
        {
            **row.payload,
            "interaction": row.kind,
            "status": row.status,
            "resumable": session.answerable(row),
        }
        for row in rows
    ]


def _opened_session() -> TutorSession:
    from deeptutor_jupyter.kernel import warm
    from deeptutor_jupyter.kernel.magics import current_tutor

    warm.wait()
    tutor = current_tutor()
    if tutor is None:
        raise RuntimeError("Run %load_ext deeptutor_jupyter first.")
    session = tutor.session
    if not session.is_open:
        session.open(session.resolve({}))
    return session


def unload_ipython_extension(ipython: Any) -> None:
    from deeptutor_jupyter.kernel.magics import unregister

    unregister(ipython)
