"""Quiz cards wired to the session (``TutorSession.submit_quiz``): a turn's ``make_quiz``,
reviews, and the quizzes ``%tutor pending`` lists from any notebook.

A card's Submit may arrive on a kernel subshell thread: grading is handed to the session's loop.
"""

from __future__ import annotations

import html
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.kernel.widgets.quiz_card import QuizCard
    from deeptutor_jupyter.learning.quiz import QuizOutcome
    from deeptutor_jupyter.store.learning import LearningStore

FINAL_CODES = frozenset({"duplicate", "expired", "foreign_session", "unknown"})

_cards: dict[str, QuizCard] = {}  # quiz id -> its card, so an answer from code shows there too


def quiz_card_for(tutor: KernelTutor, body: dict[str, Any]) -> QuizCard:
    """The card of a ``quiz_required`` event, wired to this kernel's session."""
    return make_quiz_card(tutor, body)


def make_quiz_card(tutor: KernelTutor | None, body: dict[str, Any], grader: Any = None) -> QuizCard:
    from deeptutor_jupyter.kernel.widgets.quiz_card import QuizCard

    card: QuizCard

    def on_submit(answers: dict[str, Any], seconds: float) -> None:
        loop = tutor.session.event_loop if tutor is not None else None
        if tutor is None or not tutor.session.is_open or loop is None:
            card.show_error("This quiz can no longer be graded here.", final=True)
            return
        loop.call_soon_threadsafe(
            lambda: tutor.background(_submit(tutor, card, body, answers, seconds, grader))
        )

    language = tutor.language if tutor is not None else "en"
    card = QuizCard(body, on_submit=on_submit, language=language)
    _cards[str(body.get("id"))] = card
    return card


async def _submit(
    tutor: KernelTutor,
    card: QuizCard,
    body: dict[str, Any],
    answers: dict[str, Any],
    seconds: float,
    grader: Any,
) -> None:
    from deeptutor_jupyter.interaction.quiz import QuizError

    session = tutor.session
    try:
        result = await session.submit_quiz(body["session_id"], body["id"], answers, seconds, grader)
    except QuizError as exc:
        card.show_error(str(exc), final=exc.code in FINAL_CODES)
        return
    except Exception as exc:  # grading itself failed: the quiz stays open, nothing is lost
        card.show_error(f"Grading failed ({type(exc).__name__}: {exc}). Submit again.")
        return
    show_graded(tutor, card, result)


def show_graded(tutor: KernelTutor, card: QuizCard, result: QuizOutcome) -> None:
    """The card graded, by whichever door it was answered (its Submit, ``submit_quiz``): the
    receipt, where the turn goes on, a review's next date, and the static output it leaves."""
    session = tutor.session
    body = card.body
    where = where_text(session.continues_in(str(body["id"])))
    card.show_receipt(result, where=where)
    note = ""
    if body.get("kind") == "review":
        note = next_review_text(session.learning().store)
        card.children = (*tuple(card.children), _next_review_note(note))
    settle_display(card, result, where=where, note=note)


def settle_display(card: QuizCard, result: QuizOutcome, *, where: str = "", note: str = "") -> None:
    """A graded quiz shown on its own (a review, a ``%tutor pending`` card) becomes its static
    receipt: the questions, the learner's answers, right or wrong, feedback and score, readable
    the next day without a widget model (issue 20). Not while a turn resumed under the card
    runs: that turn's own final output (kernel/start.py) replaces the cell when it ends."""
    from IPython.display import update_display

    from deeptutor_jupyter.kernel.display import static_bundle
    from deeptutor_jupyter.kernel.widgets.quiz_card import receipt_markdown

    if card.display_id is None or (card.slot is not None and card.slot.children):
        return
    md = receipt_markdown(card.body, result)
    if where:
        md += f"\n\n_The tutor continues in {where}._"
    if note:
        md += f"\n\n{note}"
    bundle = static_bundle(md + "\n", card.display_id)
    update_display(bundle, raw=True, display_id=card.display_id)  # type: ignore[no-untyped-call]


def where_text(place: dict[str, Any] | None) -> str:
    """Where a turn goes on, in words: "lesson.ipynb, cell [3]" ("" when here)."""
    if not place:
        return ""
    cell = f", cell {place['cell']}" if place.get("cell") else ""
    return f"{place.get('notebook') or 'another notebook'}{cell}"


def next_review_text(store: LearningStore) -> str:
    upcoming = store.cards(limit=1)
    next_at = time_until(upcoming[0].due) if upcoming else "nothing scheduled"
    return f"Rescheduled. Next review: {next_at}"


def _next_review_note(text: str) -> Any:
    import ipywidgets as widgets

    w = widgets.HTML(f'<div style="opacity:0.75">{html.escape(text)}')
    w.add_class("dt-review-next")
    return w


def time_until(ts: float) -> str:
    delta = ts - time.time()
    if delta <= 0:
        return "now"
    if delta < 3600:
        return f"in {max(1, round(delta / 60))} min"
    if delta < 86400:
        return f"in {round(delta / 3600)} h"
    from deeptutor_jupyter.words import plural

    return f"in {plural(round(delta / 86400), 'day', 'days')}"
