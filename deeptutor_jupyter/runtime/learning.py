"""A session's learning state: the quiz coordinator, where the learner stands, quiz traces.

The learning tables live in ``state.db`` (store/learning.py) and belong to the learner, not to a
notebook. One ``Learning`` per session and home holds the store connection and the
``QuizCoordinator`` (interaction/quiz.py) that ``make_quiz`` pauses on; runtime/plan.py hands it
to each turn (``deps["quizzes"]``) and adds :func:`standing_text` to the system prompt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.interaction.quiz import QuizCoordinator
    from deeptutor_jupyter.learning.mastery import Mastery
    from deeptutor_jupyter.learning.path import LearningPath
    from deeptutor_jupyter.runtime.orchestrator import Turn
    from deeptutor_jupyter.runtime.session import TutorSession
    from deeptutor_jupyter.store.learning import LearningStore, QuizRow
    from deeptutor_jupyter.tools.base import ToolDeps


@dataclass
class Learning:
    store: LearningStore
    quizzes: QuizCoordinator
    home: Path
    # A surface hook: show a turn continued for a quiz answered after its kernel restarted.
    on_resumed: Callable[[Turn, QuizRow], None] | None = None
    # runtime/plan.py's resume_deps, handed in (plan imports this module, not the reverse).
    resume_deps: Callable[[TutorSession, Path, dict[str, Any]], ToolDeps] | None = None


_by_session: dict[int, tuple[TutorSession, Learning]] = {}


def learning_of(session: TutorSession, home: Path) -> Learning:
    entry = _by_session.get(id(session))
    if entry is not None and entry[0] is session and entry[1].home == home:
        return entry[1]
    from deeptutor_jupyter.interaction.audit import AuditLog
    from deeptutor_jupyter.interaction.quiz import QuizCoordinator
    from deeptutor_jupyter.store.learning import LearningStore

    store = LearningStore(home / "state.db")
    coordinator = QuizCoordinator(store, AuditLog(home / "audit" / "quizzes.jsonl"))
    learning = Learning(store, coordinator, home)
    coordinator.on_graded = lambda row, result: graded(session, learning, row, result)
    coordinator.on_orphan = lambda row, result: resume_quiz_turn_soon(
        session, learning, row, result
    )
    _by_session[id(session)] = (session, learning)
    return learning


def learning_if_open(session: TutorSession) -> Learning | None:
    entry = _by_session.get(id(session))
    return entry[1] if entry is not None and entry[0] is session else None


def masteries(store: LearningStore) -> dict[str, Mastery]:
    from deeptutor_jupyter.learning.mastery import Evidence, estimate

    grouped: dict[str, list[Evidence]] = {}
    for objective, score, guess, ts in store.evidence():
        grouped.setdefault(objective, []).append(Evidence(score, guess, ts))
    return {objective: estimate(items) for objective, items in grouped.items()}


def current_path(store: LearningStore) -> tuple[str, LearningPath] | None:
    from deeptutor_jupyter.learning.path import LearningPath

    latest = store.latest_path()
    if latest is None:
        return None
    return latest[0], LearningPath.model_validate(latest[1])


def standing_text(store: LearningStore) -> str:
    """Where the learner stands on their path, for the system prompt ("" without a path)."""
    from deeptutor_jupyter.learning.path import standing_block

    found = current_path(store)
    if found is None:
        return ""
    due = len(store.cards(due_before=time.time()))
    return standing_block(found[1], masteries(store), due)


def graded(session: TutorSession, learning: Learning, row: QuizRow, result: dict[str, Any]) -> None:
    """A quiz was graded: its trace, and the mastery numbers for a course that asks for them."""
    record_trace(session, row, result)
    from deeptutor_jupyter.runtime.course import course_objectives, send_mastery

    try:
        shared = session.resolve({}).settings.share_progress
    except Exception:  # settings that do not resolve share nothing
        shared = False
    if shared:
        # Only the course's objectives: the titles of a learner's own paths say what they
        # study, which is theirs.
        course = course_objectives(learning.home)
        send_mastery({o: v for o, v in mastery_report(learning.store).items() if o in course})


def mastery_report(store: LearningStore) -> dict[str, dict[str, float | int]]:
    """``{objective: {"p": probability, "n": graded answers}}``: all a course may see."""
    return {o: {"p": m.p, "n": m.n} for o, m in sorted(masteries(store).items())}


def record_trace(session: TutorSession, row: QuizRow, result: dict[str, Any]) -> None:
    """A graded quiz or review is an L1 trace (surface ``quiz``): ids, score, right or wrong
    per question; never the learner's answers, which may be free text or code."""
    from deeptutor_jupyter.memory import TraceRecord, new_trace_id

    if session.memory is None:
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
        notebook=session.notebook,
        quiz={
            "quiz_id": row.quiz_id,
            "objective": row.objective,
            "score": result.get("score"),
            "results": [{"id": r.get("id"), "correct": r.get("correct")} for r in results],
        },
    )
    session.memory.emit(record)


def resume_quiz_turn_soon(
    session: TutorSession, learning: Learning, row: QuizRow, result: dict[str, Any]
) -> None:
    loop = session.event_loop
    if loop is not None:
        loop.call_soon_threadsafe(resume_quiz_turn, session, learning, row, result)


def resume_quiz_turn(
    session: TutorSession, learning: Learning, row: QuizRow, result: dict[str, Any]
) -> Turn | None:
    """Continue the turn a quiz paused (its kernel restarted), with the grade as the result.

    Without a saved state this process can use, the grade is still recorded (mastery, review
    cards); only the conversation does not go on.
    """
    from deeptutor_jupyter.interaction.quiz import tool_result_of
    from deeptutor_jupyter.runtime.events import EventLog
    from deeptutor_jupyter.runtime.orchestrator import STATE_VERSION

    saved = learning.store.quiz_state(row.quiz_id)
    learning.store.drop_quiz_state(row.quiz_id)
    if session.store is None or session.orchestrator is None or not saved:
        return None
    if learning.resume_deps is None:
        return None
    context = saved.get("context") or {}
    call = (saved.get("loop") or {}).get("current_call") or {}
    if saved.get("version") != STATE_VERSION or call.get("id") != row.tool_call_id:
        return None
    if context.get("capability") != "chat":
        return None
    profile = context.get("profile") or {}
    resolved = session.resolve({k: profile.get(k) for k in ("provider", "model", "base_url")})
    if not resolved.ready:
        return None
    log = EventLog(row.turn_id, session.store, start_seq=session.store.last_seq(row.turn_id))
    session._follow(log)  # the session's own subscriber: trace and history on done
    deps = learning.resume_deps(session, resolved.settings.home, context)
    turn = session.orchestrator.resume_turn(
        saved, tool_result_of(result), session.model_for(resolved), log, deps
    )
    session._track(turn)
    if learning.on_resumed is not None:
        learning.on_resumed(turn, row)
    return turn
