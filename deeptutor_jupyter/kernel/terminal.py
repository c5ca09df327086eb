"""``%tutor`` in a terminal IPython: no kernel loop and no widgets, so the turn runs to the end
in the cell and prints as it streams. It is the same session as in a notebook (same tools,
plan and trace); only ask_user degrades, since no form can be shown: the model gets the explicit
degraded result and the loop goes on.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from deeptutor_jupyter.agent.events import Event
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.runtime.orchestrator import Turn


def run_in_terminal(
    tutor: KernelTutor,
    resolved: ResolvedSettings,
    question: str,
    *,
    new: bool,
    capability: str = "chat",
    out: TextIO | None = None,
) -> Turn | None:
    from deeptutor_jupyter.config import setup_instructions_markdown
    from deeptutor_jupyter.runtime.plan import PlanError
    from deeptutor_jupyter.runtime.session import AskOptions

    stream = out or sys.stdout
    if not resolved.ready:
        stream.write("\n".join(resolved.missing()) + "\n\n")
        stream.write(setup_instructions_markdown(resolved.settings.language) + "\n")
        return None
    session = tutor.session
    options = AskOptions(new=new, interactive=False, place=tutor.place(), capability=capability)

    def printer(event: Event) -> None:
        _print(event, stream)

    try:
        return asyncio.run(session.run(question, resolved, options, subscriber=printer))
    except PlanError as exc:
        stream.write(f"{exc}\n")
        return None


def _print(event: Event, out: TextIO) -> None:
    from deeptutor_jupyter.agent.events import (
        Content,
        Done,
        ErrorEvent,
        Notice,
        ToolCallFinished,
        ToolCallStarted,
    )

    match event.body:
        case Content(text=text):
            out.write(text)
        case ToolCallStarted(name=name):
            out.write(f"\n[{name}]\n")
        case ToolCallFinished(name=name, summary=summary):
            out.write(f"[{name}: {summary or 'done'}]\n")
        case Notice(text=text):
            out.write(f"\n({text})\n")
        case ErrorEvent(message=message, hint=hint):
            out.write(f"\nError: {message}\n")
            if hint:
                out.write(f"How to fix: {hint}\n")
        case Done():
            out.write("\n")
    out.flush()
