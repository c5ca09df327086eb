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
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.runtime.events import Event
    from deeptutor_jupyter.runtime.orchestrator import Turn


def run_in_terminal(
    tutor: KernelTutor,
    resolved: ResolvedSettings,
    question: str,
    *,
    new: bool,
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
    options = AskOptions(new=new, interactive=False, place=tutor.place())

    def printer(event: Event) -> None:
        _print(event, stream)

    try:
        return asyncio.run(session.run(question, resolved, options, subscriber=printer))
    except PlanError as exc:
        stream.write(f"{exc}\n")
        return None


def _print(event: Event, out: TextIO) -> None:
    d = event.data
    if event.type == "content":
        out.write(d["text"])
    elif event.type == "tool_call":
        out.write(f"\n[{d['name']}]\n")
    elif event.type == "tool_result":
        out.write(f"[{d['name']}: {d.get('summary') or 'done'}]\n")
    elif event.type == "notice":
        out.write(f"\n({d['text']})\n")
    elif event.type == "error":
        out.write(f"\nError: {d.get('message', '')}\n")
        if d.get("hint"):
            out.write(f"How to fix: {d['hint']}\n")
    elif event.type == "done":
        out.write("\n")
    out.flush()
