"""``%tutor learn``, ``%tutor review``, ``%tutor progress``, and the quiz cards of a turn.

The learning state lives in ``state.db`` (store/learning.py) and is per learner, not per
notebook: ``%tutor learn`` with no topic continues the last path in any notebook. The quiz
coordinator (interaction/quiz.py) is made once per session and handed to turns through their
``ToolDeps.quizzes`` (tools/base.py, filled by runtime/plan.py).
"""

from __future__ import annotations

import shlex
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.kernel.display import show_markdown
from deeptutor_jupyter.kernel.quiz_cards import make_quiz_card, time_until
from deeptutor_jupyter.words import plural

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.runtime.learning import Learning

LEARN_USAGE = """\
```
%tutor learn <topic> [--kb NAME]   propose a learning path (confirm or edit it), or continue it
%tutor learn                       continue the last path, in any notebook: teach its open objective
%tutor review [--all]              the review cards that are due (--all: any), as a quiz (FSRS)
%tutor progress                    mastery per objective, the review forecast, what to do next
```"""
REVIEW_BATCH = 10


def learning_for(tutor: KernelTutor, home: Path) -> Learning:
    """The session's learning state (runtime/learning.py), opened with its store on ``home``."""
    learning = tutor.session.learning(home)
    return learning


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
    learning = learning_for(tutor, resolved.settings.home)
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
    from deeptutor_jupyter.runtime.learning import current_path, masteries

    found = current_path(learning.store)
    assert found is not None
    _, path = found
    kb = kb or path.kb  # the knowledge base the path was planned with
    objective = current(path, masteries(learning.store))
    if objective is None:
        show_markdown(
            f"Every objective of **{path.topic}** is mastered. `%tutor review` keeps it fresh."
        )
        return
    show_markdown(f"**Learning path:** {path.topic} · now: **{objective.title}**")
    question = (
        f"Teach me the objective {objective.title!r} (id `{objective.id}`) of my learning path "
        f"on {path.topic!r}: a short explanation with an example, then check my understanding "
        f'with make_quiz (objective "{objective.id}").'
    )
    from deeptutor_jupyter.kernel.start import ask_in_cell

    shown = f"Teach me: {objective.title}"  # the bubble; the instructions go to the model
    kbs = [kb] if kb else []
    ask_in_cell(tutor, resolved, question, new=False, kbs=kbs, shown=shown, instructions=True)


def review_command(tutor: KernelTutor, resolved: ResolvedSettings, every: bool = False) -> None:
    """The due cards as a quiz; ``every`` (``--all``): the earliest cards, due or not."""
    from IPython.display import display

    from deeptutor_jupyter.kernel.display import widget_bundle
    from deeptutor_jupyter.kernel.widgets.quiz_card import form_markdown
    from deeptutor_jupyter.learning.quiz import MakeQuizArgs

    tutor.open(resolved)
    learning = learning_for(tutor, resolved.settings.home)
    due_before = None if every else time.time()
    due = learning.store.cards(due_before=due_before, limit=REVIEW_BATCH)
    if not due:
        upcoming = learning.store.cards(limit=1)
        when = f"next one {time_until(upcoming[0].due)}" if upcoming else "no cards yet"
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
        {
            "title": f"Review: {plural(len(due), 'card', 'cards')} due",
            "objective": "",
            "questions": questions,
        }
    )
    grader = None
    if resolved.ready:
        from deeptutor_jupyter.interaction.quiz import model_completer

        grader = model_completer(tutor.session.model_for(resolved))
    row = learning.quizzes.open_quiz(
        tutor.session.session_id,
        f"review-{uuid.uuid4().hex[:8]}",
        "",
        "review",
        quiz,
        grader=grader,
        extra={"cards": cards, "objectives": objectives},
    )
    body = learning.quizzes.form_body(row)
    card = make_quiz_card(tutor, body, grader)
    card.display_id = f"review-{row.quiz_id}"  # graded, the output becomes the static receipt
    bundle = widget_bundle(card, form_markdown(body), card.display_id)
    display(bundle, raw=True, display_id=card.display_id)  # type: ignore[no-untyped-call]


def progress_command(tutor: KernelTutor, resolved: ResolvedSettings) -> None:
    from IPython.display import display

    from deeptutor_jupyter.kernel.progress import progress_outputs

    tutor.open(resolved)
    learning = learning_for(tutor, resolved.settings.home)
    for bundle in progress_outputs(learning.store):
        display(bundle, raw=True)  # type: ignore[no-untyped-call]
