"""A session's learning state: the quiz coordinator, where the learner stands, quiz traces.

The learning tables live in ``state.db`` (store/learning.py) and belong to the learner, not to a
notebook. The ``TutorSession`` owns one ``Learning`` (``session.learning``), opened with its
store: the learning store connection and the ``QuizCoordinator`` (interaction/quiz.py) that
``make_quiz`` pauses on; runtime/plan.py hands it to each turn (``ToolDeps.quizzes``) and adds
:func:`standing_text` to the system prompt. A quiz's paused turn is resumed like any other
(``TutorSession.resume``).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deeptutor_jupyter.interaction.pending import PendingCalls
    from deeptutor_jupyter.interaction.quiz import QuizCoordinator
    from deeptutor_jupyter.learning.mastery import Mastery
    from deeptutor_jupyter.learning.path import LearningPath
    from deeptutor_jupyter.learning.quiz import QuizOutcome
    from deeptutor_jupyter.runtime.session import TutorSession
    from deeptutor_jupyter.store.learning import LearningStore, QuizRow


@dataclass
class Learning:
    """The learning part a ``TutorSession`` owns (``session.learning``), opened with its store."""

    store: LearningStore
    quizzes: QuizCoordinator
    home: Path

    def close(self) -> None:
        self.store.close()


def open_learning(session: TutorSession, calls: PendingCalls, home: Path) -> Learning:
    """The session's learning state on ``home``: quizzes and reviews are kinds of the
    session's deferred calls (``calls``), so they are listed, owned, consumed and resumed like
    every pause. Open quizzes an older version saved apart are adopted on the way."""
    from deeptutor_jupyter.interaction.audit import AuditLog
    from deeptutor_jupyter.interaction.quiz import QuizCoordinator
    from deeptutor_jupyter.store.learning import LearningStore

    store = LearningStore(home / "state.db")
    coordinator = QuizCoordinator(store, calls, AuditLog(home / "audit" / "quizzes.jsonl"))
    learning = Learning(store, coordinator, home)
    coordinator.on_graded = lambda row, result: graded(session, learning, row, result)
    # A read-only store still serves reads; the next open tries again.
    with contextlib.suppress(Exception):
        coordinator.adopt_old_quizzes()
    return learning


def masteries(store: LearningStore) -> dict[str, Mastery]:
    from deeptutor_jupyter.learning.mastery import Evidence, estimate

    grouped: dict[str, list[Evidence]] = {}
    for objective, score, guess, ts in store.evidence():
        grouped.setdefault(objective, []).append(Evidence(score, guess, ts))
    return {objective: estimate(items) for objective, items in grouped.items()}


def current_path(store: LearningStore) -> tuple[str, LearningPath] | None:
    latest = store.latest_path()
    if latest is None:  # most learners: the path code is not imported (issue 28)
        return None
    from deeptutor_jupyter.learning.path import LearningPath

    return latest[0], LearningPath.model_validate(latest[1])


def standing_text(store: LearningStore) -> str:
    """Where the learner stands on their path, for the system prompt ("" without a path)."""
    found = current_path(store)
    if found is None:
        return ""
    from deeptutor_jupyter.learning.path import standing_block

    due = len(store.cards(due_before=time.time()))
    return standing_block(found[1], masteries(store), due)


def graded(session: TutorSession, learning: Learning, row: QuizRow, result: QuizOutcome) -> None:
    """A quiz was graded: its trace, and the mastery numbers for a course that asks for them."""
    record_trace(session, row, result)
    from deeptutor_jupyter.runtime.course import (
        course_objectives,
        send_mastery,
        send_quiz_score,
        send_review,
    )

    try:
        shared = session.resolve({}).settings.share_progress
    except Exception:  # settings that do not resolve share nothing
        shared = False
    if shared:
        # Only the course's objectives: the titles of a learner's own paths say what they
        # study, which is theirs.
        course = course_objectives(learning.home)
        send_mastery({o: v for o, v in mastery_report(learning.store).items() if o in course})
        if result.cancelled or result.score is None:
            return
        # The score out of the questions asked (partial credit counts), docs/lms.md.
        asked = len(result.results)
        points = round(result.score * asked, 3)
        if row.kind == "review":
            # A review of a course objective, for the course's learning records.
            if row.objective in course:
                send_review(row.objective, points, asked)
        else:
            # A course notebook's quiz, for the LMS gradebook.
            send_quiz_score(session.notebook, points, asked)


def mastery_report(store: LearningStore) -> dict[str, dict[str, float | int]]:
    """``{objective: {"p": probability, "n": graded answers}}``: all a course may see."""
    return {o: {"p": m.p, "n": m.n} for o, m in sorted(masteries(store).items())}


def record_trace(session: TutorSession, row: QuizRow, result: QuizOutcome) -> None:
    """A graded quiz or review is an L1 trace (surface ``quiz``): ids, score, right or wrong
    per question; never the learner's answers, which may be free text or code."""
    from deeptutor_jupyter.memory import TraceRecord, new_trace_id

    if session.memory is None:
        return
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
        answer_summary=f"score {result.score}: {result.right} of {len(result.results)} right",
        notebook=session.notebook,
        quiz={
            "quiz_id": row.quiz_id,
            "objective": row.objective,
            "score": result.score,
            "results": [{"id": r.id, "correct": r.correct} for r in result.results],
        },
    )
    session.memory.emit(record)
