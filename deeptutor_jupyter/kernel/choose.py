"""The panel's model and knowledge-base chooser, kernel side: the comm's ``choose`` action and
``choices`` message (kernel/comm_messages.py), over ``TutorSession.choices``/``choose``
(runtime/choice.py). Kept apart from kernel/comm.py so the comm stays a list of small actions."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.kernel.comm_messages import ChooseAction
    from deeptutor_jupyter.kernel.tutor import KernelTutor

log = logging.getLogger(__name__)


def choices(tutor: KernelTutor) -> dict[str, Any] | None:
    """The ``choices`` message of the current conversation; None when no model is configured
    (the first turn shows the setup card) or the store cannot be read (that turn says why)."""
    from deeptutor_jupyter.kernel.comm_messages import ChoicesMessage

    session = tutor.session
    resolved = session.resolve({})
    if not resolved.ready:
        return None
    try:
        found = session.choices(resolved)
    except Exception:
        log.warning("the panel's chooser could not be filled", exc_info=True)
        return None
    return ChoicesMessage.model_validate(found).model_dump(mode="json")


def choose(tutor: KernelTutor, data: ChooseAction) -> str | None:
    """Keep the conversation's choice; why it was refused, in words, or None."""
    from deeptutor_jupyter.runtime.choice import ChoiceError

    session = tutor.session
    resolved = session.resolve({})
    if not resolved.ready:
        return "The tutor has no model configured yet: run %tutor config in a cell first."
    try:
        session.choose(resolved, data.conversation, data.model, list(data.kbs))
    except ChoiceError as exc:
        return str(exc)
    return None
