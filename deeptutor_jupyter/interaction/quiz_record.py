"""What a graded quiz leaves behind: mastery evidence and a review card per question (FSRS)."""

from __future__ import annotations

from datetime import UTC, datetime

from deeptutor_jupyter.learning import review as fsrs_review
from deeptutor_jupyter.learning.quiz import ChoiceQuestion, MakeQuizArgs, QuestionResult
from deeptutor_jupyter.store.learning import LearningStore, QuizRow


def record_grades(
    store: LearningStore,
    row: QuizRow,
    quiz: MakeQuizArgs,
    results: list[QuestionResult],
    seconds: float | None,
) -> None:
    """Mastery evidence per question, and a review card per question (FSRS)."""
    # Here, not at import: a first request imports this module, a grade is later (issue 28).
    from deeptutor_jupyter.learning.mastery import guess_rate

    by_id = {q.id: q for q in quiz.questions}
    cards: dict[str, int] = row.spec.get("cards", {})
    objectives: dict[str, str] = row.spec.get("objectives", {})
    per_question = seconds / len(results) if seconds is not None and results else None
    evidence = []
    now = datetime.now(UTC)
    for r in results:
        if r.graded_by == "none":  # not graded (no sandbox here): it says nothing of mastery
            continue
        if not r.answered:  # a blank is no attempt: no evidence, no rating (docs/learning.md)
            continue
        q = by_id[r.id]
        objective = objectives.get(r.id, quiz.objective)
        options = len(q.options) if isinstance(q, ChoiceQuestion) else 0
        if objective:
            evidence.append((objective, row.quiz_id, r.id, r.score, guess_rate(q.kind, options)))
        card_id = cards.get(r.id)
        first = card_id is None
        if card_id is None:
            card_id = store.new_card_id(objective, q.model_dump(mode="json"))
            card = fsrs_review.new_card(card_id, now)
        else:
            existing = store.get_card(card_id)
            if existing is None:
                continue
            card = existing.card
        rating = fsrs_review.rating_for(r.score, first_try=first, seconds=per_question)
        card, due, log = fsrs_review.review(card, rating, now)
        store.save_card(card_id, card, due.timestamp(), rating, log)
    if evidence:
        store.add_evidence(evidence)
