"""The card of a turn a full disk ended (issue 23): what happened, what was and was not kept.

A full disk does not let a turn go on: its answer could be kept nowhere, and its row would say
``running`` for the kernel's lifetime. The orchestrator stops it and ends it as failed
(runtime/orchestrator.py ``_disk_full``); this is what the learner reads about it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deeptutor_jupyter.agent.events import Content, ErrorEvent

if TYPE_CHECKING:
    from deeptutor_jupyter.runtime.events import EventLog


def disk_full_error(log: EventLog, question_saved: bool, why: str) -> ErrorEvent:
    """The card of a turn the full disk ended: what happened, and what was and was not kept
    (``why`` is the store's own words). The message says it all: the saved notebook shows the
    message alone."""
    answered = any(
        isinstance(e.body, Content) and not e.body.explore and e.seq <= log.saved_seq
        for e in log.events
    )
    if question_saved and answered:
        kept = "your question and the answer as far as it had been saved when the disk filled"
    elif question_saved:
        kept = "your question, but nothing of the answer"
    else:
        kept = "nothing of this turn"
    return ErrorEvent(
        kind="disk_full",
        message=f"The disk is full, so this answer stopped here. Kept: {kept}.",
        hint="The rest of the answer was not saved, and this turn is not part of the "
        "conversation's history. Free some space, then ask again.",
        detail=why,
    )
