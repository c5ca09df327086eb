"""make_quiz in a real kernel, answered through widget comm messages like a browser would.

FakeLLMServer scripts the model; the evidence is the request log (the graded result arrives as
the tool message of the same tool call id) and the widget state the browser could read.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.e2e.conftest import fake_llm, kernel  # fixtures
from tests.e2e.kernel_driver import KernelDriver

pytestmark = pytest.mark.e2e
__all__ = ["fake_llm", "kernel"]

EXPLANATION = "Because-the-determinant-EXPLAINED"
TESTS = "assert sq(3) == 9  # HIDDEN-TEST"
QUIZ: dict[str, Any] = {
    "title": "Check 1",
    "objective": "squares",
    "questions": [
        {
            "id": "q1",
            "kind": "choice",
            "prompt": "Which is 2 squared?",
            "options": [{"id": "a", "label": "two"}, {"id": "b", "label": "four"}],
            "answer": ["b"],
            "explanation": EXPLANATION,
        },
        {
            "id": "q2",
            "kind": "numeric",
            "prompt": "Speed?",
            "answer": 3.0,
            "tolerance": 0.01,
            "unit": "m/s",
        },
        {
            "id": "q3",
            "kind": "code",
            "prompt": "Write sq(x).",
            "starter": "def sq(x):\n    ...",
            "tests": TESTS,
            "timeout_s": 5,
        },
    ],
}


def quiz_reply(quiz: dict[str, Any], call_id: str = "call_quiz_1") -> Reply:
    return Reply(text="A short check.", tool_calls=[ToolCallSpec("make_quiz", quiz, id=call_id)])


def update(k: KernelDriver, comm_id: str, **state: Any) -> None:
    k.send_comm(comm_id, {"method": "update", "state": state, "buffer_paths": []})


def of_model(k: KernelDriver, root: str, model: str) -> list[str]:
    return list(
        k.wait_for(
            lambda: [c for c in k.descendants(root) if k.widgets[c].get("_model_name") == model]
        )
    )


def card_of(k: KernelDriver) -> str:
    return str(k.wait_for(lambda: k.with_class("dt-quiz") and k.with_class("dt-quiz")[0]))


def submit(k: KernelDriver, card: str) -> None:
    button = k.wait_for(
        lambda: [c for c in k.with_class("dt-quiz-submit") if c in k.descendants(card)]
    )
    k.click(button[0])


def submit_anyway(k: KernelDriver, card: str, blanks: str) -> None:
    """Submit with blanks: the card asks first ("2 of 3 questions ..."), then Submit anyway."""
    submit(k, card)
    k.wait_for(
        lambda: [
            c
            for c in k.with_class("dt-quiz-confirm-text")
            if blanks in str(k.widgets[c].get("value", ""))
        ]
    )
    anyway = [c for c in k.with_class("dt-quiz-anyway") if c in k.descendants(card)]
    k.click(anyway[0])


def tool_messages(server: FakeLLMServer, call_id: str) -> list[dict[str, Any]]:
    return [
        m
        for r in server.requests
        for m in r.body.get("messages", [])
        if m.get("role") == "tool" and m.get("tool_call_id") == call_id
    ]


def receipt(k: KernelDriver) -> str:
    return "\n".join(str(k.widgets[c].get("value", "")) for c in k.with_class("dt-quiz-receipt"))


def answer_text(k: KernelDriver) -> str:
    return "".join(k.markdown_in(v) for v in k.with_class("dt-turn"))


def test_a_quiz_is_answered_in_the_widgets_and_graded_for_the_same_tool_call(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([quiz_reply(QUIZ), Reply(text="Nice work on squares.")])
    kernel.execute("%tutor Quiz me on squares")
    card = card_of(kernel)
    radio = of_model(kernel, card, "RadioButtonsModel")[0]
    texts = of_model(kernel, card, "TextModel")
    code = of_model(kernel, card, "AnyModel")
    # Nothing a browser can read gives the answers away before Submit.
    state = json.dumps(kernel.widgets)
    for secret in (EXPLANATION, "HIDDEN-TEST", '"answer"'):
        assert secret not in state
    assert "def sq(x)" in state  # the starter is there
    # Nor does the saved event log (replayed to views later): the tool_call carries the public view.
    home = tmp_path / "home"
    msg = kernel.execute(
        "import sqlite3\n"
        f"db = sqlite3.connect({str(home / 'state.db')!r})\n"
        'print(db.execute("select group_concat(data) from events").fetchone()[0])'
    )
    saved_events = kernel.stream_text(msg)
    assert "make_quiz" in saved_events and "def sq(x)" in saved_events
    for secret in (EXPLANATION, "HIDDEN-TEST"):
        assert secret not in saved_events
    update(kernel, radio, index=1)
    update(kernel, texts[0], value="3.001 m/s")
    update(kernel, code[0], value="def sq(x):\n    return x * x\n")
    submit(kernel, card)
    kernel.wait_for(lambda: "Nice work on squares." in answer_text(kernel), timeout=60)
    sent = tool_messages(fake_llm, "call_quiz_1")
    assert len(sent) == 1
    result = json.loads(sent[0]["content"])
    assert result["score"] == 1.0
    assert [(r["id"], r["correct"]) for r in result["results"]] == [
        ("q1", True),
        ("q2", True),
        ("q3", True),
    ]
    assert result["results"][0]["given"] == ["b"]
    text = kernel.wait_for(lambda: EXPLANATION in receipt(kernel) and receipt(kernel))
    assert "score 100%" in text
    # The learner's state: mastery evidence and one review card per question.
    msg = kernel.execute(
        "import sqlite3\n"
        f"db = sqlite3.connect({str(home / 'state.db')!r})\n"
        "print(db.execute('select count(*) from mastery_evidence').fetchone()[0],"
        " db.execute('select count(*) from review_cards').fetchone()[0])"
    )
    assert kernel.stream_text(msg).split() == ["3", "3"]
    audit = (home / "audit" / "quizzes.jsonl").read_text()
    assert "return x * x" not in audit and "3.001" not in audit
    # The graded quiz is an L1 trace (surface quiz) with right/wrong per question, no answers.
    traces = [
        json.loads(line)
        for f in sorted((home / "memory" / "trace" / "quiz").glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    assert len(traces) == 1 and traces[0]["quiz"]["score"] == 1.0
    assert traces[0]["quiz"]["objective"] == "squares"
    assert "return x * x" not in json.dumps(traces) and "3.001" not in json.dumps(traces)


def test_a_wrong_answer_is_graded_wrong_and_a_bad_number_is_sent_back(
    kernel: KernelDriver, fake_llm: FakeLLMServer
) -> None:
    fake_llm.extend([quiz_reply(QUIZ), Reply(text="Let us go over it.")])
    kernel.execute("%tutor Quiz me")
    card = card_of(kernel)
    texts = of_model(kernel, card, "TextModel")
    update(kernel, texts[0], value="three")
    submit_anyway(kernel, card, "2 of 3 questions are not answered")
    errors = kernel.wait_for(
        lambda: [
            c
            for c in kernel.with_class("dt-quiz-error")
            if "not a number" in str(kernel.widgets[c].get("value", ""))
        ]
    )
    assert errors
    update(kernel, texts[0], value="3 km/h")
    submit_anyway(kernel, card, "2 of 3 questions are not answered")
    kernel.wait_for(lambda: "Let us go over it." in answer_text(kernel), timeout=60)
    result = json.loads(tool_messages(fake_llm, "call_quiz_1")[0]["content"])
    assert [r["correct"] for r in result["results"]] == [False, False, False]
    assert [r.get("answered", True) for r in result["results"]] == [False, True, False]
    assert "'km/h' is not the unit asked for" in result["results"][1]["feedback"]


def test_hostile_tests_are_contained_and_the_kernel_stays_responsive(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    target = tmp_path / "learner-files" / "homework.txt"
    target.parent.mkdir()
    target.write_text("my homework")
    hostile = {
        "title": "Hostile",
        "questions": [
            {
                "id": "loop",
                "kind": "code",
                "prompt": "p",
                "tests": "while True:\n    pass",
                "timeout_s": 3,
            },
            {
                "id": "net",
                "kind": "code",
                "prompt": "p",
                "tests": "import socket\nsocket.create_connection(('127.0.0.1', 9))",
            },
            {
                "id": "files",
                "kind": "code",
                "prompt": "p",
                "tests": f"open({str(target)!r}, 'w').write('gone')",
            },
        ],
    }
    fake_llm.extend([quiz_reply(hostile, "call_h"), Reply(text="Done.")])
    kernel.execute("%tutor Quiz me")
    card = card_of(kernel)
    for box in of_model(kernel, card, "AnyModel"):
        update(kernel, box, value="x = 1\n")
    submit(kernel, card)
    # While the sandbox grinds through the endless loop, the kernel still runs cells.
    msg = kernel.execute("print(6 * 7)")
    assert kernel.stream_text(msg).strip() == "42"
    kernel.wait_for(lambda: "Done." in answer_text(kernel), timeout=60)
    result = json.loads(tool_messages(fake_llm, "call_h")[0]["content"])
    feedback = {r["id"]: r["feedback"] for r in result["results"]}
    assert not any(r["correct"] for r in result["results"])
    assert "did not finish" in feedback["loop"]
    assert "refused" in feedback["net"] or "unreachable" in feedback["net"].lower()
    assert target.read_text() == "my homework"


def test_a_quiz_survives_a_kernel_restart_and_continues_its_turn(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([quiz_reply(QUIZ, "call_restart"), Reply(text="Graded after the restart.")])
    kernel.execute("%tutor Quiz me")
    card_of(kernel)
    kernel.restart()
    kernel.execute("%load_ext deeptutor_jupyter")
    kernel.execute("%tutor pending")
    card = card_of(kernel)
    state = json.dumps(kernel.widgets)
    assert EXPLANATION not in state and "HIDDEN-TEST" not in state
    update(kernel, of_model(kernel, card, "RadioButtonsModel")[0], index=1)
    update(kernel, of_model(kernel, card, "TextModel")[0], value="3")
    update(kernel, of_model(kernel, card, "AnyModel")[0], value="def sq(x):\n    return 9\n")
    submit(kernel, card)
    kernel.wait_for(lambda: "Graded after the restart." in answer_text(kernel), timeout=60)
    sent = tool_messages(fake_llm, "call_restart")
    assert len(sent) == 1
    assert json.loads(sent[0]["content"])["score"] == 1.0
    # The resumed part is in the store after what was saved before the restart: seqs go on.
    import sqlite3

    def stored() -> list[tuple[int, str, str]]:
        with contextlib.closing(sqlite3.connect(tmp_path / "home" / "state.db")) as conn:
            return list(conn.execute("SELECT seq, type, data FROM events ORDER BY seq"))

    kernel.wait_for(lambda: [t for _, t, _ in stored()][-1:] == ["done"])
    events = stored()
    seqs, types = [e[0] for e in events], [e[1] for e in events]
    assert seqs == sorted(set(seqs)) and seqs[0] == 1  # a run of text is one row: gaps are fine
    assert types.index("quiz_required") < types.index("tool_result") < types.index("done")
    graded = [json.loads(d) for _, t, d in events if t == "tool_result"]
    assert [g["id"] for g in graded] == ["call_restart"]
    assert types.count("done") == 1 and json.loads(events[-1][2])["status"] == "done"
    text = "".join(json.loads(d)["text"] for _, t, d in events if t == "content")
    assert text.endswith("Graded after the restart.")
    # Consumed once: a second %tutor pending shows nothing to answer.
    before = len(kernel.with_class("dt-quiz"))
    kernel.execute("%tutor pending")
    kernel.pump(0.5)
    assert len(kernel.with_class("dt-quiz")) == before


def test_a_quiz_listed_by_pending_in_its_own_kernel_follows_the_answer_given_in_its_cell(
    kernel: KernelDriver, fake_llm: FakeLLMServer
) -> None:
    one = {"title": "One", "objective": "squares", "questions": [QUIZ["questions"][0]]}
    fake_llm.extend([quiz_reply(one, "call_here"), Reply(text="Answered in the cell.")])
    kernel.execute("%tutor Quiz me")
    in_cell = card_of(kernel)
    kernel.execute("%tutor pending")
    listed = kernel.wait_for(lambda: [c for c in kernel.with_class("dt-quiz") if c != in_cell])[0]
    update(kernel, of_model(kernel, in_cell, "RadioButtonsModel")[0], index=1)
    submit(kernel, in_cell)
    kernel.wait_for(lambda: "Answered in the cell." in answer_text(kernel), timeout=30)

    def listed_receipt() -> str:
        return "".join(
            str(kernel.widgets[c].get("value", ""))
            for c in kernel.with_class("dt-quiz-receipt")
            if c in kernel.descendants(listed)
        )

    kernel.wait_for(lambda: "100%" in listed_receipt())
    assert len(tool_messages(fake_llm, "call_here")) == 1


def test_the_quiz_speaks_jupyterlabs_language_and_language_overrides_it(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    from deeptutor_jupyter.config import save_lab_language

    one = {"title": "One", "objective": "squares", "questions": [QUIZ["questions"][0]]}
    fake_llm.extend([quiz_reply(one, "call_zh"), quiz_reply(one, "call_en")])
    save_lab_language(tmp_path / "home", "zh-CN")  # what the labextension reports (api.ts)

    def submit_words() -> list[str]:
        return [
            str(kernel.widgets[c].get("description")) for c in kernel.with_class("dt-quiz-submit")
        ]

    kernel.execute("%tutor Quiz me")
    kernel.wait_for(lambda: len(submit_words()) == 1)
    kernel.execute("%tutor --new --language en Quiz me again")
    kernel.wait_for(lambda: len(submit_words()) == 2)
    assert submit_words() == ["提交答案", "Submit answers"]
