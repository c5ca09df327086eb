"""Quizzes and paths from code: a notebook, a test or another surface uses the same doors as the
forms (``start_path`` is the path form's Start button, ``submit_quiz`` a quiz card's Submit).

Separate from kernel/learn_commands.py because it finds the kernel's tutor through
kernel/magics.py, which itself dispatches to learn_commands.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.kernel.learn_commands import learning_for
from deeptutor_jupyter.kernel.quiz_cards import _cards, show_graded

if TYPE_CHECKING:
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.learning.quiz import QuizOutcome
    from deeptutor_jupyter.runtime.learning import Learning

__all__ = ["confirm_path", "pending_quizzes", "start_path", "submit_quiz", "wait_for_quiz"]


def _tutor_and_learning() -> tuple[KernelTutor, Learning]:
    from deeptutor_jupyter.kernel.magics import current_tutor

    tutor = current_tutor()
    if tutor is None:
        raise RuntimeError("Load the extension first: %load_ext deeptutor_jupyter")
    session = tutor.session
    if not session.is_open:
        tutor.open(session.resolve({}))
    assert session.home is not None
    return tutor, learning_for(tutor, session.home)


def start_path(topic: str, objectives: str) -> list[str]:
    """Start a path from code, as the form's Start button does: one objective per line."""
    from deeptutor_jupyter.learning.path import path_from_lines

    _, learning = _tutor_and_learning()
    path = path_from_lines(topic, objectives)
    learning.store.save_path(f"path-{uuid.uuid4().hex[:10]}", topic, path.model_dump(mode="json"))
    return [o.id for o in path.objectives]


def pending_quizzes() -> list[dict[str, Any]]:
    """The open quizzes of this notebook, as their forms see them (no answers)."""
    tutor, _ = _tutor_and_learning()
    return [dict(r.payload) for r in tutor.session.pending() if r.kind != "ask_user"]


async def wait_for_quiz(timeout: float = 60.0) -> dict[str, Any]:
    """Wait (without blocking the kernel) until a quiz is open, and return its form body."""
    import asyncio

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := pending_quizzes():
            return found[-1]
        await asyncio.sleep(0.05)
    raise TimeoutError(f"No quiz was opened within {timeout:g} s.")


async def submit_quiz(quiz_id: str, answers: dict[str, Any]) -> QuizOutcome:
    """Answer a quiz from code, of any notebook; the same door as the form's Submit. Returns
    the grade; the quiz's turn goes on in its owner's cell (or here if its kernel is gone)."""
    tutor, learning = _tutor_and_learning()
    session = tutor.session
    row = learning.store.get_quiz(quiz_id)
    owner = row.session_id if row is not None else session.session_id
    grader = learning.quizzes.graders.get(quiz_id)
    result = await session.submit_quiz(owner, quiz_id, answers, None, grader)
    card = _cards.get(quiz_id)
    if card is not None and card.state != "graded":
        show_graded(tutor, card, result)  # its output is left as the static receipt too
    return result


def confirm_path() -> str:
    """Press Start on the latest path form of this kernel, as the learner would; its state."""
    from deeptutor_jupyter.kernel.widgets.path_card import SHOWN

    if not SHOWN:
        raise RuntimeError("No path form was shown: run %tutor learn <topic> first.")
    card = SHOWN[-1]
    card.save()
    return card.state
