"""Start a turn from the magic: build its context and view, display it, hand it to the runtime."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.kernel.display import turn_markdown, widget_bundle
from deeptutor_jupyter.kernel.i18n import t

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings, Settings
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.kernel.widgets.turn_view import TurnView
    from deeptutor_jupyter.runtime.context import ModelProfile
    from deeptutor_jupyter.runtime.events import Event, EventLog


def start_turn(
    tutor: KernelTutor,
    resolved: ResolvedSettings,
    question: str,
    *,
    new: bool,
    kbs: list[str] | None = None,
    user_tools: tuple[str, ...] | None = None,
    no_tools: bool = False,
    attachments: list[Path] | None = None,
) -> None:
    from IPython.display import display

    from deeptutor_jupyter.runtime.context import TurnContext
    from deeptutor_jupyter.runtime.events import EventLog

    if not resolved.ready:
        show_setup(resolved)
        return
    missing = [str(p) for p in attachments or [] if not p.is_file()]
    if missing:
        from deeptutor_jupyter.kernel.display import show_markdown

        show_markdown(f"⚠ Attachment not found: {', '.join(missing)}")
        return
    s = resolved.settings
    tutor.open(resolved)
    if new:
        tutor.new_session()
    assert tutor.orchestrator is not None and tutor.store is not None
    cell_id = tutor.last_cell_id
    tutor.cancel_cell(cell_id, t("superseded", s.language))
    tutor.store.ensure_session(tutor.session_id, tutor.notebook)

    profile = profile_of(s)
    turn_id = f"turn-{uuid.uuid4().hex[:12]}"
    from deeptutor_jupyter.kernel.display import show_markdown
    from deeptutor_jupyter.kernel.turn_plan import PlanError, plan_turn

    model = tutor.model_for(resolved)  # first: it registers the key the plan must redact
    try:
        plan = plan_turn(tutor, s, kbs=kbs or [], user_tools=user_tools, no_tools=no_tools)
    except PlanError as exc:
        show_markdown(str(exc))
        return
    ctx = TurnContext(
        session_id=tutor.session_id,
        turn_id=turn_id,
        question=question,
        profile=profile,
        history=tutor.history,
        cell_id=cell_id,
        language=s.language,
        system_blocks=plan.system_blocks,
        enabled_tools=plan.enabled_tools,
        attachments=[str(p.resolve()) for p in attachments or []],
        metadata={"kbs": kbs or []},  # a resumed turn selects the same knowledge bases
    )
    log = EventLog(turn_id, tutor.store)
    view = attach_view(
        tutor, log, profile.model_dump(), question, display_id=turn_id, trace=s.trace_in_outputs
    )
    running_md = turn_markdown(question, "", model=profile.label, status="running", tools=[])
    display(widget_bundle(view, running_md), raw=True, display_id=turn_id)  # type: ignore[no-untyped-call]
    turn = tutor.orchestrator.start_turn(ctx, model, log, plan.extra)
    tutor.track(turn, view)
    if cell_id:
        tutor.cell_turns[cell_id] = turn


def profile_of(s: Settings) -> ModelProfile:
    """The model a turn talks to, from the effective settings (never the key)."""
    from deeptutor_jupyter.runtime.context import ModelProfile

    return ModelProfile(
        provider=s.provider or "",
        model=s.model or "",
        base_url=s.base_url,
        max_rounds=s.max_rounds,
        max_tokens=s.max_tokens,
        temperature=s.temperature,
    )


def attach_view(
    tutor: KernelTutor,
    log: EventLog,
    profile: dict[str, Any],
    question: str,
    display_id: str | None = None,
    trace: bool = True,
) -> TurnView:
    """A TurnView subscribed to the log; with a display id, the saved-notebook Markdown too."""
    from IPython.display import update_display

    from deeptutor_jupyter.kernel import interactions
    from deeptutor_jupyter.kernel.turn_plan import record_trace, source_links, sources_markdown
    from deeptutor_jupyter.kernel.widgets.turn_view import TurnView

    language = tutor.language
    label = f"{profile.get('provider')}/{profile.get('model')}"

    def stop() -> None:
        turn = tutor.turn_of(log.turn_id)
        if turn is not None:
            tutor.stop_soon(turn, t("stopped_by_learner", language))

    view = TurnView(
        model_label=label,
        language=language,
        on_stop=stop,
        make_card=lambda body: interactions.make_card(tutor, body),
    )
    log.subscribe(view.handle)
    tutor.logs[log.turn_id] = log
    tools_used: list[str] = []

    sources: list[tuple[str, str]] = []

    def on_event(event: Event) -> None:
        if event.type == "tool_call":
            tools_used.append(event.data["name"])
        elif event.type == "sources":
            sources[:] = source_links(event.data.get("hits", []), tutor.workspace)
            view.show_sources(sources_markdown(sources))
        elif event.type == "done":
            tutor.logs.pop(log.turn_id, None)
            turn = tutor.turn_of(log.turn_id)
            record = None
            if turn is not None:
                record = record_trace(tutor, turn, log)
                if tutor.session_id == turn.ctx.session_id:
                    tutor.history.extend(turn.messages)
            if display_id is None:
                return
            errors = [e.data.get("message", "") for e in log.events if e.type == "error"]
            md = turn_markdown(
                question,
                event.data.get("answer", ""),
                model=label,
                status=event.data.get("status", "done"),
                tools=tools_used,
                error="; ".join(errors),
            )
            if sources:
                md += "\n" + sources_markdown(sources) + "\n"
            if view.quiz_receipts:  # graded quizzes, readable without widgets
                md += "\n" + "\n\n".join(view.quiz_receipts) + "\n"
            bundle = widget_bundle(view, md)
            if trace and record is not None:
                from deeptutor_jupyter.memory import TRACE_MIME

                bundle[TRACE_MIME] = record.model_dump(mode="json")
            update_display(bundle, raw=True, display_id=display_id)  # type: ignore[no-untyped-call]

    log.subscribe(on_event)
    return view


def show_setup(resolved: ResolvedSettings) -> None:
    from IPython.display import display

    from deeptutor_jupyter.kernel.widgets.setup_card import SetupCard

    display(SetupCard(resolved))  # type: ignore[no-untyped-call]
