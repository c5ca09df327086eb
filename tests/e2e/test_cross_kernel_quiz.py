"""make_quiz across kernels: a quiz is a pending interaction like an ask_user question.

Two real kernels share one learner home. A quiz asked in notebook A is listed in B (``%tutor
pending --all``, ``pending_interactions()``), answered and graded there from the stored quiz,
and A's turn goes on in A's cell; only when A is gone does B resume the saved turn itself.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.e2e.kernel_driver import KernelDriver, shown_text
from tests.e2e.test_cross_kernel import db, kernels, kill, last_static_update, start
from tests.learning.test_quiz_kernel import (
    answer_text,
    of_model,
    quiz_reply,
    receipt,
    submit,
    tool_messages,
    update,
)

pytestmark = pytest.mark.e2e
__all__ = ["kernels"]

EXPLANATION = "Four-because-TWO-TIMES-TWO"
QUIZ: dict[str, Any] = {
    "title": "Across notebooks",
    "objective": "squares",
    "questions": [
        {
            "id": "q1",
            "kind": "choice",
            "prompt": "Which is 2 squared?",
            "options": [{"id": "a", "label": "two"}, {"id": "b", "label": "four"}],
            "answer": ["b"],
            "explanation": EXPLANATION,
        }
    ],
}
CALL = "call_quiz_x"


def quiz_cards(k: KernelDriver) -> list[str]:
    return list(k.with_class("dt-quiz"))


def pending_quiz_in(k: KernelDriver) -> str:
    """``%tutor pending --all`` in ``k``: the quiz card it shows."""
    before = set(quiz_cards(k))
    k.execute("%tutor pending --all")
    return str(k.wait_for(lambda: [c for c in quiz_cards(k) if c not in before])[0])


def answer_right(k: KernelDriver, card: str) -> None:
    update(k, of_model(k, card, "RadioButtonsModel")[0], index=1)
    submit(k, card)


def card_receipt(k: KernelDriver, card: str) -> str:
    return "\n".join(
        str(k.widgets[c].get("value", ""))
        for c in k.with_class("dt-quiz-receipt")
        if c in k.descendants(card)
    )


def listed(k: KernelDriver) -> list[dict[str, Any]]:
    code = "import json, deeptutor_jupyter as dt\nprint(json.dumps(dt.pending_interactions()))"
    msg_id = k.execute(code)
    return list(json.loads(k.stream_text(msg_id)))


def continuations(server: FakeLLMServer) -> list[Any]:
    """Requests that carry the quiz's tool message: each is a run of the paused turn."""
    return [
        r
        for r in server.requests
        if any(m.get("tool_call_id") == CALL for m in r.body.get("messages", []))
    ]


def test_a_quiz_asked_in_a_is_answered_in_b_and_continues_in_a(
    tmp_path: Path, fake_llm: FakeLLMServer, kernels: list[KernelDriver]
) -> None:
    fake_llm.extend([quiz_reply(QUIZ, CALL), Reply(text="Graded: on in A's own cell.")])
    a = start(tmp_path, fake_llm, "lesson_a")
    kernels.append(a)
    a.execute("x = 1")
    a.execute("%tutor Quiz me")  # In [3]: %load_ext was [1]
    card_a = str(a.wait_for(lambda: quiz_cards(a))[0])

    b = start(tmp_path, fake_llm, "lesson_b")
    kernels.append(b)
    # Listed in B like a question, with its public form only.
    quizzes = [q for q in listed(b) if q["interaction"] == "quiz"]
    assert [q["tool_call_id"] for q in quizzes] == [CALL]
    assert quizzes[0]["resumable"] is True
    assert EXPLANATION not in json.dumps(quizzes) and '"answer"' not in json.dumps(quizzes)
    card_b = pending_quiz_in(b)
    assert EXPLANATION not in json.dumps(b.widgets)  # B's form holds no answers either
    answer_right(b, card_b)

    # A's own cell continues; A's card follows the grade given in B.
    a.wait_for(lambda: "Graded: on in A's own cell." in answer_text(a), timeout=30)
    a.wait_for(lambda: "100%" in card_receipt(a, card_a))
    # B grades, says where the turn goes on, and runs nothing of it.
    b.wait_for(lambda: "lesson_a.ipynb, cell [3]" in card_receipt(b, card_b))
    # B's saved file keeps the graded quiz as its static receipt, not the open form (issue 20).
    settled = last_static_update(b)
    text = shown_text(settled)
    assert "score 100%" in text and "lesson_a.ipynb, cell [3]" in text
    assert "Graded: on in A's own cell." not in answer_text(b)
    assert len(continuations(fake_llm)) == 1 and len(fake_llm.requests) == 2
    sent = tool_messages(fake_llm, CALL)
    assert len(sent) == 1 and json.loads(sent[0]["content"])["score"] == 1.0
    a.wait_for(lambda: db(tmp_path, "SELECT status FROM turns") == [("done",)])
    assert db(tmp_path, "SELECT COUNT(*) FROM turn_states") == [(0,)]
    assert db(tmp_path, "SELECT kind, status FROM pending") == [("quiz", "answered")]
    # Consumed once: B's list is empty now, and a second card cannot grade it again.
    assert [q for q in listed(b) if q["interaction"] == "quiz"] == []
    assert "100%" in receipt(b)


def test_a_quiz_whose_kernel_died_is_resumed_by_the_kernel_that_answers(
    tmp_path: Path, fake_llm: FakeLLMServer, kernels: list[KernelDriver]
) -> None:
    # Paused after its first words until the checkpoint is looked at: a loaded machine cannot
    # finish the turn first.
    resume = threading.Event()
    words = ["Resumed ", "in ", "B ", "after ", "grading."]
    slow = Reply(chunks=words, chunk_delay=0.1, hold_after=1, hold=resume)
    fake_llm.extend([quiz_reply(QUIZ, CALL), slow])
    a = start(tmp_path, fake_llm, "lesson_a")
    a.execute("%tutor Quiz me")
    a.wait_for(lambda: quiz_cards(a))
    kill(a)

    b = start(tmp_path, fake_llm, "lesson_b")
    kernels.append(b)
    card_b = pending_quiz_in(b)
    answer_right(b, card_b)
    b.wait_for(lambda: "Resumed" in answer_text(b), timeout=30)
    # Running, not yet checkpointed again: the saved turn is still there (a crash now leaves
    # the quiz answerable again with its grade kept).
    assert db(tmp_path, "SELECT COUNT(*) FROM turn_states") == [(1,)]
    resume.set()
    b.wait_for(lambda: "after grading." in answer_text(b), timeout=30)
    b.wait_for(lambda: db(tmp_path, "SELECT status FROM turns") == [("done",)])
    assert db(tmp_path, "SELECT COUNT(*) FROM turn_states") == [(0,)]
    assert len(continuations(fake_llm)) == 1
    sent = tool_messages(fake_llm, CALL)
    assert len(sent) == 1 and json.loads(sent[0]["content"])["score"] == 1.0
    # The resumed turn says first what was answered, as the live one would have.
    kinds = [r[0] for r in db(tmp_path, "SELECT type FROM events ORDER BY seq")]
    resumed = kinds.index("turn_started", 1)
    assert kinds[resumed + 1] == "quiz_resolved"
    seqs = [r[0] for r in db(tmp_path, "SELECT seq FROM events ORDER BY rowid")]
    assert seqs == sorted(set(seqs))


def test_a_quiz_card_shown_elsewhere_follows_the_grade_given_in_the_owner(
    tmp_path: Path, fake_llm: FakeLLMServer, kernels: list[KernelDriver]
) -> None:
    fake_llm.extend([quiz_reply(QUIZ, CALL), Reply(text="Answered in A itself.")])
    a = start(tmp_path, fake_llm, "lesson_a")
    kernels.append(a)
    a.execute("%tutor Quiz me")
    card_a = str(a.wait_for(lambda: quiz_cards(a))[0])
    b = start(tmp_path, fake_llm, "lesson_b")
    kernels.append(b)
    card_b = pending_quiz_in(b)
    answer_right(a, card_a)
    a.wait_for(lambda: "Answered in A itself." in answer_text(a), timeout=30)
    # B's card is no longer an open form: it shows the grade given in A.
    b.wait_for(lambda: "100%" in card_receipt(b, card_b))
    assert not [c for c in b.with_class("dt-quiz-submit") if c in b.descendants(card_b)]
