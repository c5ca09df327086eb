"""Context and quizzes of the Tutor panel in a real kernel, played from the panel's side of the
comm: attachments read by the notebook-context tools show as tool cards (what the model saw,
secrets redacted), a bad attachment is refused and nothing starts, and a quiz answered over the
comm is graded once, its result the tool result of the same make_quiz call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.e2e.kernel_driver import SECRET, KernelDriver
from tests.e2e.test_sidebar_comm import Panel

pytestmark = pytest.mark.e2e


def user_text(fake_llm: FakeLLMServer) -> str:
    return json.dumps([m for m in fake_llm.requests[0].body["messages"] if m["role"] == "user"])


def test_attached_cell_file_and_quote_are_cards_of_what_the_model_saw(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([Reply(text="The denominator is zero.")])
    kernel.execute("key = " + repr(SECRET) + "\ntotal = 10")  # [2] (%load_ext was [1])
    with pytest.raises(AssertionError, match="ZeroDivisionError"):
        kernel.execute("total / 0")  # [3]
    (tmp_path / "notes.md").write_text("Division by zero is undefined.\n")
    panel = Panel(kernel)
    panel.send(
        {
            "action": "ask",
            "question": "Why does this fail?",
            "conversation": None,
            "attachments": [
                {"kind": "cell", "number": 3},
                {"kind": "cell", "number": 2},
                {"kind": "file", "path": "notes.md"},
                {"kind": "quote", "text": "total / 0", "number": 3},
            ],
            "notebook_path": "lesson.ipynb",
        }
    )
    panel.wait(lambda: panel.events("done"))
    asked = [m for m in panel.messages() if m["type"] == "asked"]
    assert len(asked) == 1 and asked[0]["turn_id"] == panel.events("done")[0]["turn_id"]
    calls = panel.events("tool_call")
    results = panel.events("tool_result")
    assert [c["name"] for c in calls] == ["read_cell", "read_cell", "read_file", "selected_text"]
    assert [r["id"] for r in results] == [c["id"] for c in calls]
    cell, first, notes, quote = (r["content"] for r in results)
    assert "Cell [3]" in cell and "total / 0" in cell and "ZeroDivisionError" in cell
    assert "[redacted]" in first and SECRET not in json.dumps(panel.messages())
    assert "Division by zero is undefined." in notes
    assert "> total / 0" in quote
    # The model read exactly what the cards show, with the learner's question after them.
    sent = user_text(fake_llm)
    for content in (cell, first, notes, quote):
        assert json.dumps(content)[1:-1] in sent
    assert SECRET not in sent
    assert panel.events("turn_started")[0]["question"] == "Why does this fail?"
    # The saved events (the turn's trace, replayed after a reload) hold the same cards.
    again = Panel(kernel)
    again.wait(lambda: any(m["type"] == "turns" for m in again.messages()))
    turn_id = panel.events("done")[0]["turn_id"]
    again.send({"action": "subscribe", "turn_id": turn_id, "after_seq": 0})
    again.wait(lambda: again.events("done"))
    assert [r["content"] for r in again.events("tool_result")] == [cell, first, notes, quote]
    # The turn's L1 trace names the context tools it read with.
    records = [
        json.loads(line)
        for path in (tmp_path / "home" / "memory" / "trace").rglob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    (record,) = [r for r in records if r["turn_id"] == turn_id]
    assert record["tools"] == ["read_cell", "read_cell", "read_file", "selected_text"]
    assert record["question"] == "Why does this fail?"


def test_a_bad_attachment_is_refused_and_nothing_is_asked(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    (tmp_path / "image.bin").write_bytes(bytes(range(256)) * 4)
    (tmp_path.parent / "outside.txt").write_text("not yours")
    panel = Panel(kernel)
    panel.wait(lambda: any(m["type"] == "turns" for m in panel.messages()))
    for index, path in ((0, "image.bin"), (1, "../outside.txt")):
        attachments: list[dict[str, Any]] = [{"kind": "quote", "text": "x"}] * index
        attachments.append({"kind": "file", "path": path})
        panel.send({"action": "ask", "question": "Look.", "attachments": attachments})
    errors = panel.wait(lambda: len(panel.errors()) >= 2 and panel.errors())
    assert [(e["code"], e["attachment"]) for e in errors] == [("attachment", 0), ("attachment", 1)]
    assert "not a text file" in errors[0]["message"]
    assert "outside the folder Jupyter serves" in errors[1]["message"]
    assert panel.events() == [] and fake_llm.requests == []


QUIZ = {
    "title": "Check",
    "objective": "squares",
    "questions": [
        {
            "id": "q1",
            "kind": "choice",
            "prompt": "Which is 2 squared?",
            "options": [{"id": "a", "label": "two"}, {"id": "b", "label": "four"}],
            "answer": ["b"],
            "explanation": "EXPLAINED-AFTER-GRADING",
        },
        {"id": "q2", "kind": "numeric", "prompt": "3 squared?", "answer": 9.0},
    ],
}


def test_a_quiz_answered_over_the_comm_is_graded_once_for_its_call(
    kernel: KernelDriver, fake_llm: FakeLLMServer
) -> None:
    fake_llm.extend(
        [
            Reply(text="A check.", tool_calls=[ToolCallSpec("make_quiz", QUIZ, id="call_q")]),
            Reply(text="Well done."),
        ]
    )
    panel = Panel(kernel)
    panel.send({"action": "ask", "question": "Quiz me."})
    quiz = panel.wait(lambda: panel.events("quiz_required"))[0]
    before = json.dumps(panel.messages())
    assert "EXPLAINED-AFTER-GRADING" not in before and '"answer"' not in before
    answer = {"action": "quiz_answer", "quiz_id": quiz["id"], "answers": {"q1": ["b"], "q2": "9"}}
    panel.send({**answer, "session_id": "nb-someone-else"})
    panel.wait(lambda: panel.errors())
    panel.send({**answer, "session_id": quiz["session_id"], "seconds": 12.5})
    panel.send({**answer, "session_id": quiz["session_id"], "answers": {"q1": ["a"]}})
    panel.wait(lambda: panel.events("done"))
    panel.wait(lambda: len(panel.errors()) >= 2)

    graded = [m for m in panel.messages() if m["type"] == "quiz_graded"]
    assert len(graded) == 1 and graded[0]["score"] == 1.0
    foreign, duplicate = panel.errors()
    assert (foreign["code"], foreign["quiz_id"]) == ("foreign_session", quiz["id"])
    assert duplicate["code"] == "duplicate" and "already submitted" in duplicate["message"]
    resolved = panel.events("quiz_resolved")
    assert len(resolved) == 1 and resolved[0]["tool_call_id"] == "call_q"
    tool = [m for r in fake_llm.requests for m in r.body["messages"] if m.get("tool_call_id")]
    assert len(tool) == 1 and json.loads(tool[0]["content"])["score"] == 1.0
    assert "Well done." in "".join(e["text"] for e in panel.events("content"))


def test_a_cell_quiz_answered_in_the_panel_shows_its_receipt_in_the_cell(
    kernel: KernelDriver, fake_llm: FakeLLMServer
) -> None:
    from tests.learning.test_quiz_kernel import card_of, receipt

    fake_llm.extend(
        [
            Reply(text="A check.", tool_calls=[ToolCallSpec("make_quiz", QUIZ, id="call_c")]),
            Reply(text="Good."),
        ]
    )
    kernel.execute("%tutor Quiz me in the cell.")
    card = card_of(kernel)
    panel = Panel(kernel)
    turns = panel.wait(lambda: [m for m in panel.messages() if m["type"] == "turns"])[0]
    (turn,) = turns["turns"]
    panel.send({"action": "subscribe", "turn_id": turn["turn_id"], "after_seq": 0})
    quiz = panel.wait(lambda: panel.events("quiz_required"))[0]
    panel.send(
        {"action": "quiz_answer", "quiz_id": quiz["id"], "session_id": quiz["session_id"],
         "answers": {"q1": ["a"], "q2": "9"}}
    )  # fmt: skip
    panel.wait(lambda: [m for m in panel.messages() if m["type"] == "quiz_graded"])
    # The cell's card follows the turn's quiz_resolved: the receipt shows there too.
    shown = kernel.wait_for(lambda: "EXPLAINED" in receipt(kernel) and receipt(kernel))
    assert "50%" in shown
    kernel.wait_for(lambda: len(fake_llm.requests) == 2)
    tool = [m for r in fake_llm.requests for m in r.body["messages"] if m.get("tool_call_id")]
    assert len(tool) == 1 and json.loads(tool[0]["content"])["score"] == 0.5
    submits = [c for c in kernel.with_class("dt-quiz-submit") if c in kernel.descendants(card)]
    assert submits == []  # nothing left to submit twice in the cell
