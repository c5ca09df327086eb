"""``%tutor`` in a terminal IPython: no kernel loop and no widgets, so the turn runs to the end
in the cell and prints as it streams. ask_user has no form here; the model gets the explicit
degraded result and the loop goes on.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
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
    from deeptutor_jupyter.kernel.start import profile_of
    from deeptutor_jupyter.runtime.context import TurnContext
    from deeptutor_jupyter.runtime.events import EventLog
    from deeptutor_jupyter.runtime.orchestrator import Orchestrator

    stream = out or sys.stdout
    s = resolved.settings
    if not resolved.ready:
        stream.write("\n".join(resolved.missing()) + "\n\n")
        stream.write(setup_instructions_markdown(s.language) + "\n")
        return None
    tutor.open(resolved)
    if new:
        tutor.new_session()
    assert tutor.store is not None
    tutor.store.ensure_session(tutor.session_id, tutor.notebook)
    profile = profile_of(s)
    ctx = TurnContext(
        session_id=tutor.session_id,
        turn_id=f"turn-{uuid.uuid4().hex[:12]}",
        question=question,
        profile=profile,
        history=tutor.history,
        language=s.language,
    )
    orchestrator = Orchestrator(tutor.store)  # no coordinator: no form to show

    async def main() -> Turn:
        # A model per run: its HTTP client belongs to this run's event loop.
        model = tutor.model_for(resolved, cached=False)
        log = EventLog(ctx.turn_id, tutor.store)
        log.subscribe(lambda event: _print(event, stream))
        turn = orchestrator.start_turn(ctx, model, log)
        try:
            assert turn.task is not None
            await turn.task
        finally:
            await model.aclose()
        return turn

    turn = asyncio.run(main())
    tutor.history.extend(turn.messages)
    tutor.turns.append(turn)
    return turn


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
