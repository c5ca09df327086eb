"""ask_user in the kernel: cards wired to the coordinator, ``%tutor pending``, exact resume.

A card answers through ``InteractionCoordinator.submit``, the same door the public
``submit_user_input`` and (later) the sidebar use. After a kernel restart the saved turn state is
what makes a card resumable; submitting it starts the saved turn again in this kernel, in a slot
under the card, and the model receives the tool message for the original tool call id.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.kernel.i18n import t

if TYPE_CHECKING:
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.kernel.widgets.ask_user_card import AskUserCard
    from deeptutor_jupyter.store.db import PendingRow

# Refusals after which the card cannot be fixed by editing the answer.
FINAL_CODES = frozenset({"duplicate", "expired", "foreign_session", "unknown", "not_resumable"})


def make_card(tutor: KernelTutor, body: dict[str, Any]) -> AskUserCard:
    from deeptutor_jupyter.kernel.widgets.ask_user_card import AskUserCard

    card: AskUserCard

    def on_submit(selections: list[str], custom_input: str, cancelled: bool) -> None:
        answer(tutor, card, body, selections, custom_input, cancelled)

    card = AskUserCard(
        body, on_submit=on_submit, language=tutor.language, workspace_hint=str(tutor.workspace)
    )
    return card


def answer(
    tutor: KernelTutor,
    card: AskUserCard,
    body: dict[str, Any],
    selections: list[str],
    custom_input: str,
    cancelled: bool,
) -> None:
    from deeptutor_jupyter.interaction.coordinator import InteractionError

    assert tutor.coordinator is not None
    try:
        tutor.coordinator.submit(body["sessionId"], body["id"], selections, custom_input, cancelled)
    except InteractionError as exc:
        if exc.code == "expired":
            card.show_expired()
        elif exc.code == "not_resumable":
            card.show_not_resumable()
        else:
            card.show_error(str(exc), keep_disabled=exc.code in FINAL_CODES)
        return
    if cancelled:
        card.show_cancelled(time.time())
    else:
        card.show_receipt(selections, custom_input, time.time())


def update_card(card: AskUserCard, data: dict[str, Any]) -> None:
    """Reflect a resolution that came from elsewhere (another card, the API, the timer)."""
    if card.state not in ("open", "submitted"):
        return
    if data.get("reason") == "timeout":
        card.show_expired()
    elif data.get("cancelled"):
        card.show_cancelled(time.time())
    else:
        card.show_receipt(
            list(data.get("selections", [])), data.get("customInput", ""), time.time()
        )


def pending_rows(tutor: KernelTutor, all_sessions: bool) -> list[PendingRow]:
    assert tutor.store is not None and tutor.coordinator is not None
    sessions = None if all_sessions else tutor.store.sessions_of(tutor.notebook)
    return tutor.coordinator.expire_stale(tutor.store.pending_for(sessions))


def show_pending(tutor: KernelTutor, all_sessions: bool) -> None:
    """Re-render every pending card from the store (``%tutor pending [--all]``)."""
    import ipywidgets as widgets
    from IPython.display import display

    from deeptutor_jupyter.kernel.display import show_markdown, widget_bundle

    assert tutor.coordinator is not None
    rows = pending_rows(tutor, all_sessions)
    if not rows:
        show_markdown(t("no_pending", tutor.language))
        return
    for row in rows:
        body = dict(row.payload)
        live = tutor.coordinator.is_live(row.request_id)
        body["resumable"] = live or can_resume(tutor, row)
        card = make_card(tutor, body)
        slot = widgets.VBox()
        tutor.slots[row.request_id] = slot
        box = widgets.VBox([card, slot])
        box.add_class("dt-pending")
        if live and (log := tutor.logs.get(row.turn_id)) is not None:
            log.subscribe(_follow(card, row.request_id), after_seq=log.last_seq)
        text = f"**{t('pending_title', tutor.language)}** {body.get('title', '')}"
        display(widget_bundle(box, text), raw=True)  # type: ignore[no-untyped-call]


def _follow(card: AskUserCard, request_id: str) -> Any:
    def handle(event: Any) -> None:
        if event.type == "user_input_resolved" and event.data.get("id") == request_id:
            update_card(card, event.data)

    return handle


def saved_state(tutor: KernelTutor, row: PendingRow) -> dict[str, Any] | None:
    """The paused turn of this request if this kernel can continue it, else None."""
    from deeptutor_jupyter.runtime.orchestrator import STATE_VERSION

    assert tutor.store is not None and tutor.orchestrator is not None
    saved = tutor.store.turn_state(row.request_id)
    if not saved or saved.get("version") != STATE_VERSION:
        return None
    context, loop_state = saved.get("context") or {}, saved.get("loop") or {}
    if context.get("capability") != "chat":
        return None
    if (loop_state.get("current_call") or {}).get("id") != row.tool_call_id:
        return None
    wanted = context.get("enabled_tools")
    if wanted and any(tutor.orchestrator.registry.get(n) is None for n in wanted):
        return None
    if tutor.resolve is None or not tutor.resolve(_profile_flags(context)).ready:
        return None
    return saved


def can_resume(tutor: KernelTutor, row: PendingRow) -> bool:
    try:
        return saved_state(tutor, row) is not None
    except Exception:  # a damaged state is a state that cannot be restored
        return False


def _profile_flags(context: dict[str, Any]) -> dict[str, Any]:
    profile = context.get("profile") or {}
    return {k: profile.get(k) for k in ("provider", "model", "base_url")}


def resume_soon(tutor: KernelTutor, row: PendingRow, result: dict[str, Any]) -> None:
    """Called by the coordinator, maybe on a subshell thread: resume on the kernel loop."""
    assert tutor.loop is not None
    tutor.loop.call_soon_threadsafe(resume, tutor, row, result)


def resume(tutor: KernelTutor, row: PendingRow, result: dict[str, Any]) -> None:
    from deeptutor_jupyter.interaction.coordinator import tool_result_of
    from deeptutor_jupyter.kernel.start import attach_view
    from deeptutor_jupyter.runtime.events import EventLog

    assert tutor.store is not None and tutor.orchestrator is not None
    saved = saved_state(tutor, row)
    if saved is None or tutor.resolve is None:
        return  # submit() checked can_resume first; this only happens if settings changed since
    resolved = tutor.resolve(_profile_flags(saved["context"]))
    model = tutor.model_for(resolved)
    log = EventLog(row.turn_id, tutor.store, start_seq=tutor.store.last_seq(row.turn_id))
    view = attach_view(tutor, log, saved["context"]["profile"], saved["context"]["question"])
    slot = tutor.slots.get(row.request_id)
    if slot is not None:
        slot.children = (view,)
    from deeptutor_jupyter.kernel.turn_plan import resume_extra

    extra = resume_extra(tutor, resolved.settings.home, saved["context"])
    turn = tutor.orchestrator.resume_turn(saved, tool_result_of(result), model, log, extra)
    tutor.track(turn, view)
    tutor.store.drop_turn_state(row.request_id)
