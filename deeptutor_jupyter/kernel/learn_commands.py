"""``%tutor learn``, ``%tutor review``, ``%tutor progress``, and the quiz cards of a turn.

The learning state lives in ``state.db`` (store/learning.py) and is per learner, not per
notebook: ``%tutor learn`` with no topic continues the last path in any notebook. The quiz
coordinator (interaction/quiz.py) is made once per kernel and handed to turns through their
``extra`` (kernel/turn_plan.py), so the orchestrator needs no new attribute.
"""

from __future__ import annotations

import html
import shlex
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.kernel.display import show_markdown

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.interaction.quiz import QuizCoordinator
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.kernel.widgets.quiz_card import QuizCard
    from deeptutor_jupyter.learning.mastery import Mastery
    from deeptutor_jupyter.learning.path import LearningPath
    from deeptutor_jupyter.store.learning import LearningStore, QuizRow

LEARN_USAGE = """\
```
%tutor learn <topic> [--kb NAME]   propose a learning path (confirm or edit it), or continue it
%tutor learn                       continue the last path, in any notebook: teach its open objective
%tutor review [--all]              the review cards that are due (--all: any), as a quiz (FSRS)
%tutor progress                    mastery per objective, the review forecast, what to do next
```"""
FINAL_CODES = frozenset({"duplicate", "expired", "foreign_session", "unknown"})
REVIEW_BATCH = 10


@dataclass
class Learning:
    store: LearningStore
    quizzes: QuizCoordinator
    home: Path


_runtimes: dict[int, tuple[KernelTutor, Learning]] = {}
_cards: dict[str, QuizCard] = {}  # quiz id -> its card, so an answer from code shows there too


def learning_of(tutor: KernelTutor, home: Path) -> Learning:
    """The kernel's learning store and quiz coordinator (one per tutor and home)."""
    entry = _runtimes.get(id(tutor))
    if entry is not None and entry[0] is tutor and entry[1].home == home:
        return entry[1]
    from deeptutor_jupyter.interaction.audit import AuditLog
    from deeptutor_jupyter.interaction.quiz import QuizCoordinator
    from deeptutor_jupyter.store.learning import LearningStore

    store = LearningStore(home / "state.db")
    coordinator = QuizCoordinator(store, AuditLog(home / "audit" / "quizzes.jsonl"))
    coordinator.on_graded = lambda row, result: record_trace(tutor, row, result)
    coordinator.on_orphan = lambda row, result: resume_soon(tutor, row, result)
    learning = Learning(store, coordinator, home)
    _runtimes[id(tutor)] = (tutor, learning)
    return learning


def record_trace(tutor: KernelTutor, row: QuizRow, result: dict[str, Any]) -> None:
    """A graded quiz or review is an L1 trace (surface ``quiz``): ids, score, right or wrong
    per question; never the learner's answers, which may be free text or code."""
    from deeptutor_jupyter.memory import TraceRecord, new_trace_id

    if tutor.memory is None:
        return
    results = result.get("results") or []
    right = sum(1 for r in results if r.get("correct"))
    record = TraceRecord(
        trace_id=new_trace_id(),
        surface="quiz",
        kind=row.kind if row.kind == "review" else "quiz",
        session_id=row.session_id,
        turn_id=row.turn_id,
        model="",
        started_at=row.created_at,
        finished_at=time.time(),
        question=str(row.spec.get("quiz", {}).get("title", "Quiz")),
        answer_summary=f"score {result.get('score')}: {right} of {len(results)} right",
        notebook=tutor.notebook,
        quiz={
            "quiz_id": row.quiz_id,
            "objective": row.objective,
            "score": result.get("score"),
            "results": [{"id": r.get("id"), "correct": r.get("correct")} for r in results],
        },
    )
    tutor.memory.emit(record)


def turn_blocks(tutor: KernelTutor, home: Path) -> list[str]:
    """The system-prompt block saying where the learner stands (empty without a path)."""
    text = standing_text(learning_of(tutor, home).store)
    return [text] if text else []


def standing_text(store: LearningStore) -> str:
    from deeptutor_jupyter.learning.path import standing_block

    current = _current_path(store)
    if current is None:
        return ""
    _, path = current
    due = len(store.cards(due_before=time.time()))
    return standing_block(path, masteries(store), due)


def masteries(store: LearningStore) -> dict[str, Mastery]:
    from deeptutor_jupyter.learning.mastery import Evidence, estimate

    grouped: dict[str, list[Evidence]] = {}
    for objective, score, guess, ts in store.evidence():
        grouped.setdefault(objective, []).append(Evidence(score, guess, ts))
    return {objective: estimate(items) for objective, items in grouped.items()}


def _current_path(store: LearningStore) -> tuple[str, LearningPath] | None:
    from deeptutor_jupyter.learning.path import LearningPath

    latest = store.latest_path()
    if latest is None:
        return None
    return latest[0], LearningPath.model_validate(latest[1])


# quiz cards ----------------------------------------------------------------------------------
def quiz_card_for(body: dict[str, Any]) -> QuizCard:
    """The card of a ``quiz_required`` event, wired to this kernel's coordinator."""
    from deeptutor_jupyter.kernel.magics import current_tutor

    tutor = current_tutor()
    entry = _runtimes.get(id(tutor)) if tutor is not None else None
    learning = entry[1] if entry is not None else None
    return make_quiz_card(tutor, learning, body)


def make_quiz_card(
    tutor: KernelTutor | None, learning: Learning | None, body: dict[str, Any], grader: Any = None
) -> QuizCard:
    from deeptutor_jupyter.kernel.widgets.quiz_card import QuizCard

    card: QuizCard

    def on_submit(answers: dict[str, Any], seconds: float) -> None:
        if tutor is None or learning is None or tutor.loop is None:
            card.show_error("This quiz can no longer be graded here.", final=True)
            return
        loop = tutor.loop
        loop.call_soon_threadsafe(
            lambda: tutor.background(_submit(learning, card, body, answers, seconds, grader))
        )

    card = QuizCard(body, on_submit=on_submit)
    _cards[str(body.get("id"))] = card
    return card


async def _submit(
    learning: Learning,
    card: QuizCard,
    body: dict[str, Any],
    answers: dict[str, Any],
    seconds: float,
    grader: Any,
) -> None:
    from deeptutor_jupyter.interaction.quiz import QuizError

    try:
        result = await learning.quizzes.submit(
            body["sessionId"], body["id"], answers, seconds, grader
        )
    except QuizError as exc:
        card.show_error(str(exc), final=exc.code in FINAL_CODES)
        return
    except Exception as exc:  # grading itself failed: the quiz stays open, nothing is lost
        card.show_error(f"Grading failed ({type(exc).__name__}: {exc}). Submit again.")
        return
    card.show_receipt(result)
    if body.get("kind") == "review":
        card.children = (*tuple(card.children), _next_review_note(learning.store))


def _next_review_note(store: LearningStore) -> Any:
    import ipywidgets as widgets

    upcoming = store.cards(limit=1)
    when = _when(upcoming[0].due) if upcoming else "nothing scheduled"
    w = widgets.HTML(f'<div style="opacity:0.75">Rescheduled. Next review: {html.escape(when)}')
    w.add_class("dt-review-next")
    return w


def _when(ts: float) -> str:
    delta = ts - time.time()
    if delta <= 0:
        return "now"
    if delta < 3600:
        return f"in {max(1, round(delta / 60))} min"
    if delta < 86400:
        return f"in {round(delta / 3600)} h"
    return f"in {round(delta / 86400)} day(s)"


# commands -------------------------------------------------------------------------------------
def learn_command(tutor: KernelTutor, resolved: ResolvedSettings, rest: str) -> None:
    try:
        args = shlex.split(rest)
    except ValueError as exc:
        raise ValueError(f"Could not read the arguments: {exc}") from None
    kb = None
    if "--kb" in args:
        at = args.index("--kb")
        if at + 1 >= len(args):
            raise ValueError("--kb needs the name of a knowledge base.")
        kb = args[at + 1]
        del args[at : at + 2]
    if args and args[0] == "help":
        show_markdown(LEARN_USAGE)
        return
    topic = " ".join(args).strip()
    tutor.open(resolved)
    learning = learning_of(tutor, resolved.settings.home)
    existing = learning.store.path_by_topic(topic) if topic else learning.store.latest_path()
    if existing is not None:
        learning.store.touch_path(existing[0])
        teach(tutor, resolved, learning, kb)
        return
    if not topic:
        show_markdown("No learning path yet. Start one with `%tutor learn <topic>`.")
        return
    from deeptutor_jupyter.kernel.widgets.path_card import propose_path

    propose_path(tutor, resolved, learning, topic, kb)


def teach(
    tutor: KernelTutor, resolved: ResolvedSettings, learning: Learning, kb: str | None
) -> None:
    """Start a turn on the open objective; the standing block tells the model the rest."""
    from deeptutor_jupyter.learning.path import current

    found = _current_path(learning.store)
    assert found is not None
    _, path = found
    kb = kb or path.kb  # the knowledge base the path was planned with
    objective = current(path, masteries(learning.store))
    if objective is None:
        show_markdown(
            f"🎓 Every objective of **{path.topic}** is mastered. `%tutor review` keeps it fresh."
        )
        return
    show_markdown(f"**Learning path:** {path.topic} · now: **{objective.title}**")
    question = (
        f"Teach me the objective {objective.title!r} (id `{objective.id}`) of my learning path "
        f"on {path.topic!r}: a short explanation with an example, then check my understanding "
        f'with make_quiz (objective "{objective.id}").'
    )
    from deeptutor_jupyter.kernel.start import start_turn

    start_turn(tutor, resolved, question, new=False, kbs=[kb] if kb else [])


def review_command(tutor: KernelTutor, resolved: ResolvedSettings, every: bool = False) -> None:
    """The due cards as a quiz; ``every`` (``--all``): the earliest cards, due or not."""
    from IPython.display import display

    from deeptutor_jupyter.kernel.display import widget_bundle
    from deeptutor_jupyter.kernel.widgets.quiz_card import form_markdown
    from deeptutor_jupyter.learning.quiz import MakeQuizArgs

    tutor.open(resolved)
    learning = learning_of(tutor, resolved.settings.home)
    due_before = None if every else time.time()
    due = learning.store.cards(due_before=due_before, limit=REVIEW_BATCH)
    if not due:
        upcoming = learning.store.cards(limit=1)
        when = f"next one {_when(upcoming[0].due)}" if upcoming else "no cards yet"
        show_markdown(f"Nothing to review now ({when}). Quizzes you take become review cards.")
        return
    questions: list[dict[str, Any]] = []
    cards: dict[str, int] = {}
    objectives: dict[str, str] = {}
    for n, due_card in enumerate(due, 1):
        qid = f"r{n}"
        questions.append({**due_card.question, "id": qid})
        cards[qid], objectives[qid] = due_card.card_id, due_card.objective
    quiz = MakeQuizArgs.model_validate(
        {"title": f"Review: {len(due)} card(s) due", "objective": "", "questions": questions}
    )
    grader = None
    if resolved.ready:
        from deeptutor_jupyter.interaction.quiz import model_completer

        grader = model_completer(tutor.model_for(resolved))
    row = learning.quizzes.open_quiz(
        tutor.session_id,
        f"review-{uuid.uuid4().hex[:8]}",
        "",
        "review",
        quiz,
        grader=grader,
        extra={"cards": cards, "objectives": objectives},
    )
    body = learning.quizzes.form_body(row)
    card = make_quiz_card(tutor, learning, body, grader)
    display(widget_bundle(card, form_markdown(body)), raw=True)  # type: ignore[no-untyped-call]


def progress_command(tutor: KernelTutor, resolved: ResolvedSettings) -> None:
    from IPython.display import display

    from deeptutor_jupyter.kernel.progress import progress_bundle

    tutor.open(resolved)
    learning = learning_of(tutor, resolved.settings.home)
    display(progress_bundle(learning.store), raw=True)  # type: ignore[no-untyped-call]


# after a kernel restart -----------------------------------------------------------------------
def show_pending_quizzes(tutor: KernelTutor, resolved: ResolvedSettings) -> int:
    """Re-render this notebook's open quizzes (``%tutor pending``); answering one continues
    the turn that asked it, in a slot under the card, if this kernel can."""
    import ipywidgets as widgets
    from IPython.display import display

    from deeptutor_jupyter.kernel.display import widget_bundle
    from deeptutor_jupyter.kernel.widgets.quiz_card import form_markdown

    assert tutor.store is not None
    learning = learning_of(tutor, resolved.settings.home)
    rows = learning.store.pending_quizzes(tutor.store.sessions_of(tutor.notebook))
    now = time.time()
    rows = [r for r in rows if not (r.expires_at <= now and learning.quizzes.expire(r.quiz_id))]
    grader = None
    if resolved.ready:
        from deeptutor_jupyter.interaction.quiz import model_completer

        grader = model_completer(tutor.model_for(resolved))
    for row in rows:
        body = learning.quizzes.form_body(row)
        card = make_quiz_card(tutor, learning, body, grader)
        slot = widgets.VBox()
        tutor.slots[row.quiz_id] = slot
        box = widgets.VBox([card, slot])
        box.add_class("dt-pending")
        display(widget_bundle(box, form_markdown(body)), raw=True)  # type: ignore[no-untyped-call]
    return len(rows)


def resume_soon(tutor: KernelTutor, row: QuizRow, result: dict[str, Any]) -> None:
    if tutor.loop is not None:
        tutor.loop.call_soon_threadsafe(resume, tutor, row, result)


def resume(tutor: KernelTutor, row: QuizRow, result: dict[str, Any]) -> bool:
    """Continue the turn a quiz paused, in this kernel, with the grade as the tool result."""
    from deeptutor_jupyter.interaction.quiz import tool_result_of
    from deeptutor_jupyter.kernel.start import attach_view
    from deeptutor_jupyter.kernel.turn_plan import resume_extra
    from deeptutor_jupyter.runtime.events import EventLog
    from deeptutor_jupyter.runtime.orchestrator import STATE_VERSION

    learning = learning_of(tutor, tutor.store.path.parent) if tutor.store else None
    if learning is None or tutor.orchestrator is None or tutor.resolve is None:
        return False
    saved = learning.store.quiz_state(row.quiz_id)
    learning.store.drop_quiz_state(row.quiz_id)
    context = (saved or {}).get("context") or {}
    call = ((saved or {}).get("loop") or {}).get("current_call") or {}
    if not saved or saved.get("version") != STATE_VERSION or call.get("id") != row.tool_call_id:
        return False
    if context.get("capability") != "chat":
        return False
    profile = context.get("profile") or {}
    resolved = tutor.resolve({k: profile.get(k) for k in ("provider", "model", "base_url")})
    if not resolved.ready:
        return False
    assert tutor.store is not None
    log = EventLog(row.turn_id, tutor.store, start_seq=tutor.store.last_seq(row.turn_id))
    view = attach_view(tutor, log, profile, str(context.get("question", "")))
    if (slot := tutor.slots.get(row.quiz_id)) is not None:
        slot.children = (view,)
    extra = resume_extra(tutor, resolved.settings.home, context)
    model = tutor.model_for(resolved)
    turn = tutor.orchestrator.resume_turn(saved, tool_result_of(result), model, log, extra)
    tutor.track(turn, view)
    return True


# from code (a notebook, a test, another surface) ----------------------------------------------
def _tutor_and_learning() -> tuple[KernelTutor, Learning]:
    from deeptutor_jupyter.kernel.magics import current_tutor

    tutor = current_tutor()
    if tutor is None:
        raise RuntimeError("Load the extension first: %load_ext deeptutor_jupyter")
    if tutor.store is None and tutor.resolve is not None:
        tutor.open(tutor.resolve({}))
    assert tutor.store is not None
    return tutor, learning_of(tutor, tutor.store.path.parent)


def start_path(topic: str, objectives: str) -> list[str]:
    """Start a path from code, as the form's Start button does: one objective per line."""
    from deeptutor_jupyter.learning.path import path_from_lines

    _, learning = _tutor_and_learning()
    path = path_from_lines(topic, objectives)
    learning.store.save_path(f"path-{uuid.uuid4().hex[:10]}", topic, path.model_dump(mode="json"))
    return [o.id for o in path.objectives]


def pending_quizzes() -> list[dict[str, Any]]:
    """The open quizzes of this notebook, as their forms see them (no answers)."""
    tutor, learning = _tutor_and_learning()
    assert tutor.store is not None
    rows = learning.store.pending_quizzes(tutor.store.sessions_of(tutor.notebook))
    return [learning.quizzes.form_body(row) for row in rows]


async def wait_for_quiz(timeout: float = 60.0) -> dict[str, Any]:
    """Wait (without blocking the kernel) until a quiz is open, and return its form body."""
    import asyncio

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := pending_quizzes():
            return found[-1]
        await asyncio.sleep(0.05)
    raise TimeoutError(f"No quiz was opened within {timeout:g} s.")


async def submit_quiz(quiz_id: str, answers: dict[str, Any]) -> dict[str, Any]:
    """Answer a quiz from code; the same door as the form's Submit. Returns the grade."""
    tutor, learning = _tutor_and_learning()
    row = learning.store.get_quiz(quiz_id)
    session = row.session_id if row is not None else tutor.session_id
    grader = learning.quizzes.graders.get(quiz_id)
    result = await learning.quizzes.submit(session, quiz_id, answers, None, grader)
    card = _cards.get(quiz_id)
    if card is not None and card.state != "graded":
        card.show_receipt(result)
    return result
