"""ask_user cards in the kernel: wired to the session, and ``%tutor pending`` (every kind of
pause: questions, quizzes, reviews).

A card answers through ``TutorSession.submit``, the same door the public ``submit_user_input``,
the sidebar and the server use. The session decides where the turn goes on: in the cell that
waits on the question (here or in another notebook's kernel), or, when that kernel is gone, here,
in a slot under the card.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.kernel.i18n import t

if TYPE_CHECKING:
    from collections.abc import Callable

    from deeptutor_jupyter.agent.events import Event, UserInputResolved
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.kernel.widgets.ask_user_card import AskUserCard
    from deeptutor_jupyter.store.db import PendingRow, QuestionState

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

    session = tutor.session
    try:
        session.submit(body["session_id"], body["id"], selections, custom_input, cancelled)
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
        return
    where = _where_text(session.continues_in(body["id"]))
    card.show_receipt(selections, custom_input, time.time(), where=where)
    if where:
        settle_answered(tutor, body, selections, custom_input, where)


def settle_answered(
    tutor: KernelTutor, body: dict[str, Any], selections: list[str], custom_input: str, where: str
) -> None:
    """A ``%tutor pending`` card answered for a turn that goes on in another notebook: its
    output becomes the static question and answer (by label), readable the next day without a
    widget model (issue 20). A turn resumed under the card replaces it itself when it ends."""
    from IPython.display import update_display

    from deeptutor_jupyter.kernel.display import asked_markdown, static_bundle

    request_id = str(body.get("id"))
    slot = tutor.slots.get(request_id)
    if request_id not in tutor.pending_boxes or (slot is not None and slot.children):
        return
    labels = {
        str(o.get("id")): str(o.get("label") or o.get("id")) for o in body.get("options") or []
    }
    parts = [labels.get(s, s) for s in selections]
    if custom_input:
        parts.append(custom_input if not parts else f"other: {custom_input}")
    asked = [{"title": str(body.get("title") or ""), "answer": ", ".join(parts)}]
    md = "\n".join(asked_markdown(asked)) + f"\n_The tutor went on in {where}._\n"
    shown = pending_display_id(request_id)
    update_display(static_bundle(md, shown), raw=True, display_id=shown)  # type: ignore[no-untyped-call]


def _where_text(place: dict[str, Any] | None) -> str:
    from deeptutor_jupyter.kernel.quiz_cards import where_text

    return where_text(place)


def update_card(card: AskUserCard, resolved: UserInputResolved) -> None:
    """Reflect a resolution that came from elsewhere (another card, the API, the timer)."""
    if card.state not in ("open", "submitted"):
        return
    if resolved.reason == "timeout":
        card.show_expired()
    elif resolved.cancelled:
        card.show_cancelled(time.time())
    else:
        card.show_receipt(list(resolved.selections), resolved.custom_input, time.time())


def show_pending(tutor: KernelTutor, all_sessions: bool) -> None:
    """Re-render every pending card from the store (``%tutor pending [--all]``)."""
    import ipywidgets as widgets
    from IPython.display import display

    from deeptutor_jupyter.kernel.display import show_markdown, widget_bundle

    session = tutor.session
    rows = session.pending(all_sessions)
    if not rows:
        show_markdown(t("no_pending", tutor.language))
        return
    grader = _grader(tutor)
    for row in rows:
        body = dict(row.payload)
        if row.kind != "ask_user":  # a quiz or a review: graded here from the stored quiz
            _show_pending_quiz(tutor, row, body, grader)
            continue
        body["resumable"] = session.answerable(row)
        card = make_card(tutor, body)
        slot = widgets.VBox()
        tutor.slots[row.request_id] = slot
        box = widgets.VBox([card, slot])
        box.add_class("dt-pending")
        turn = session.turn_of(row.turn_id)
        if turn is not None and turn.task is not None and not turn.task.done():
            turn.log.subscribe(_follow(card, row.request_id), after_seq=turn.log.last_seq)
        else:  # its turn waits elsewhere (or nowhere): follow the store
            session.watch_question(row.request_id, _reflect(card))
        text = t("pending_saved", tutor.language).format(title=body.get("title", ""))
        tutor.pending_boxes[row.request_id] = box
        # A display id, so the answer of a turn resumed under this card reaches the saved file.
        shown = pending_display_id(row.request_id)
        display(widget_bundle(box, text, shown), raw=True, display_id=shown)  # type: ignore[no-untyped-call]


def _grader(tutor: KernelTutor) -> Any:
    """This kernel's model, for the short answers of a quiz graded here (None: no model)."""
    resolved = tutor.session.resolve({})
    if not resolved.ready:
        return None
    from deeptutor_jupyter.interaction.quiz import model_completer

    return model_completer(tutor.session.model_for(resolved))


def _show_pending_quiz(
    tutor: KernelTutor, row: PendingRow, body: dict[str, Any], grader: Any
) -> None:
    import ipywidgets as widgets
    from IPython.display import display

    from deeptutor_jupyter.kernel.display import widget_bundle
    from deeptutor_jupyter.kernel.quiz_cards import make_quiz_card
    from deeptutor_jupyter.kernel.widgets.quiz_card import form_markdown

    card = make_quiz_card(tutor, body, grader)
    slot = widgets.VBox()
    tutor.slots[row.request_id] = slot
    box = widgets.VBox([card, slot])
    box.add_class("dt-pending")
    tutor.pending_boxes[row.request_id] = box
    session = tutor.session
    turn = session.turn_of(row.turn_id)
    if turn is not None and turn.task is not None and not turn.task.done():
        turn.log.subscribe(_follow_quiz(card, row.request_id), after_seq=turn.log.last_seq)
    else:  # its turn waits elsewhere (or nowhere, or it is a review): follow the store
        session.watch_question(row.request_id, _reflect_quiz(card))
    shown = pending_display_id(row.request_id)
    card.display_id, card.slot = shown, slot  # graded, the output becomes the static receipt
    display(widget_bundle(box, form_markdown(body), shown), raw=True, display_id=shown)  # type: ignore[no-untyped-call]


def _reflect_quiz(card: Any) -> Callable[[QuestionState], bool]:
    """A quiz card shown here whose quiz was graded, cancelled or expired elsewhere."""
    from deeptutor_jupyter.kernel.quiz_cards import settle_display
    from deeptutor_jupyter.learning.quiz import QuizOutcome

    def update(state: QuestionState) -> bool:
        if state.status in ("pending", "grading") or state.result is None:
            return False
        if card.state in ("open", "submitted"):
            outcome = QuizOutcome.model_validate(state.result)
            card.show_receipt(outcome)
            settle_display(card, outcome)
        return True

    return update


def _follow_quiz(card: Any, quiz_id: str) -> Any:
    from deeptutor_jupyter.kernel.quiz_cards import settle_display

    def handle(event: Event) -> None:
        from deeptutor_jupyter.agent.events import QuizResolved

        match event.body:
            case QuizResolved(id=resolved_id) as graded if resolved_id == quiz_id:
                if card.state in ("open", "submitted"):
                    card.show_receipt(graded.outcome)
                    settle_display(card, graded.outcome)

    return handle


def pending_display_id(request_id: str) -> str:
    return f"pending-{request_id}"


FINISHED = frozenset({"done", "error", "cancelled", "interrupted"})


def _reflect(card: AskUserCard) -> Callable[[QuestionState], bool]:
    """Keep a card true to its question when the answer or the turn happen in another
    process: answered there, expired, and 'continuing' only while the turn still runs."""

    from deeptutor_jupyter.interaction.coordinator import result_of

    def update(state: QuestionState) -> bool:
        when = state.answered_at or time.time()
        if state.status == "expired":
            card.show_expired()
            return True
        if state.status == "cancelled":
            if card.state in ("open", "submitted"):
                card.show_cancelled(when)
            return True
        if state.status != "answered":
            return False
        finished = state.turn_status in FINISHED
        if card.state in ("open", "submitted") or (finished and card.state == "answered"):
            answer = result_of(state.result or {})
            card.show_receipt(
                list(answer.selections),
                answer.customInput,
                when,
                status="done" if finished else "continuing",
            )
        return finished

    return update


def _follow(card: AskUserCard, request_id: str) -> Any:
    from deeptutor_jupyter.agent.events import UserInputResolved

    def handle(event: Event) -> None:
        match event.body:
            case UserInputResolved(id=answered) if answered == request_id:
                update_card(card, event.body)

    return handle
