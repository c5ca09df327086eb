"""Start a turn from the magic: build its context and view, display it, hand it to the runtime."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from deeptutor_jupyter.kernel.display import turn_markdown, widget_bundle
from deeptutor_jupyter.kernel.i18n import t

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.runtime.events import Event


def start_turn(tutor: KernelTutor, resolved: ResolvedSettings, question: str, *, new: bool) -> None:
    from IPython.display import display, update_display

    from deeptutor_jupyter.kernel.widgets.turn_view import TurnView
    from deeptutor_jupyter.runtime.context import ModelProfile, TurnContext
    from deeptutor_jupyter.runtime.events import EventLog
    from deeptutor_jupyter.runtime.orchestrator import Turn

    if not resolved.ready:
        show_setup(resolved)
        return
    s = resolved.settings
    tutor.open(resolved)
    if new:
        tutor.new_session()
    assert tutor.orchestrator is not None and tutor.store is not None
    cell_id = tutor.last_cell_id
    tutor.cancel_cell(cell_id, t("superseded", s.language))
    tutor.store.ensure_session(tutor.session_id, tutor.notebook)

    profile = ModelProfile(
        provider=s.provider or "",
        model=s.model or "",
        base_url=s.base_url,
        max_rounds=s.max_rounds,
        max_tokens=s.max_tokens,
        temperature=s.temperature,
    )
    turn_id = f"turn-{uuid.uuid4().hex[:12]}"
    ctx = TurnContext(
        session_id=tutor.session_id,
        turn_id=turn_id,
        question=question,
        profile=profile,
        history=tutor.history,
        cell_id=cell_id,
        language=s.language,
    )
    model = tutor.model_for(resolved)
    log = EventLog(turn_id, tutor.store)
    holder: dict[str, object] = {}

    def stop() -> None:
        turn = holder.get("turn")
        if turn is not None:
            tutor.stop_soon(turn, t("stopped_by_learner", s.language))  # type: ignore[arg-type]

    view = TurnView(model_label=profile.label, language=s.language, on_stop=stop)
    log.subscribe(view.handle)
    tools_used: list[str] = []

    def on_event(event: Event) -> None:
        if event.type == "tool_call":
            tools_used.append(event.data["name"])
        elif event.type == "done":
            errors = [e.data.get("message", "") for e in log.events if e.type == "error"]
            md = turn_markdown(
                question,
                event.data.get("answer", ""),
                model=profile.label,
                status=event.data.get("status", "done"),
                tools=tools_used,
                error="; ".join(errors),
            )
            update_display(widget_bundle(view, md), raw=True, display_id=turn_id)  # type: ignore[no-untyped-call]
            tutor.views.pop(turn_id, None)
            turn = holder.get("turn")
            if tutor.session_id == ctx.session_id and isinstance(turn, Turn):
                tutor.history.extend(turn.messages)

    log.subscribe(on_event)
    running_md = turn_markdown(question, "", model=profile.label, status="running", tools=[])
    display(widget_bundle(view, running_md), raw=True, display_id=turn_id)  # type: ignore[no-untyped-call]
    turn = tutor.orchestrator.start_turn(ctx, model, log)
    holder["turn"] = turn
    tutor.turns.append(turn)
    tutor.views[turn_id] = view
    if cell_id:
        tutor.cell_turns[cell_id] = turn
    view.start_ticker()


def show_setup(resolved: ResolvedSettings) -> None:
    from IPython.display import display

    from deeptutor_jupyter.kernel.widgets.setup_card import SetupCard

    display(SetupCard(resolved))  # type: ignore[no-untyped-call]
