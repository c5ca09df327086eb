"""%tutor learn, %tutor progress and %tutor review in a real kernel, driven over widget comms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.e2e.conftest import fake_llm, kernel  # fixtures
from tests.e2e.kernel_driver import KernelDriver, shown_text
from tests.learning.test_quiz_kernel import (
    answer_text,
    card_of,
    of_model,
    quiz_reply,
    submit,
    tool_messages,
    update,
)

pytestmark = pytest.mark.e2e
__all__ = ["fake_llm", "kernel"]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
PATH_REPLY = json.dumps(
    {
        "objectives": [
            {"title": "Square numbers", "description": "n times n"},
            {"title": "Square roots", "description": "the inverse"},
        ]
    }
)


def choice(qid: str) -> dict[str, Any]:
    return {
        "id": qid,
        "kind": "choice",
        "prompt": f"{qid}: which is 3 squared?",
        "options": [
            {"id": "a", "label": "6"},
            {"id": "b", "label": "9"},
            {"id": "c", "label": "3"},
            {"id": "d", "label": "33"},
        ],
        "answer": ["b"],
    }


QUIZ = {
    "title": "Squares",
    "objective": "square-numbers",
    "questions": [choice("q1"), choice("q2"), choice("q3")],
}


def markdown_of(k: KernelDriver, msg_id: str) -> str:
    return "".join(
        m["content"].get("data", {}).get("text/markdown", "") for m in k.outputs_of(msg_id)
    )


def html_under(k: KernelDriver, dom_class: str) -> str:
    return "\n".join(str(k.widgets[c].get("value", "")) for c in k.with_class(dom_class))


def test_a_path_is_proposed_confirmed_taught_quizzed_and_reviewed(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    # 1. A path proposed by the model, confirmed in the form.
    fake_llm.add(Reply(text=PATH_REPLY))
    kernel.execute("%tutor learn Squares")
    lines = kernel.wait_for(
        lambda: [c for c in kernel.with_class("dt-path-lines") if kernel.widgets[c].get("value")]
    )[0]
    assert "Square numbers: n times n" in kernel.widgets[lines]["value"]
    update(kernel, lines, value="Square numbers: n times n\nSquare roots\nCubes")
    kernel.click(kernel.with_class("dt-path-confirm")[0])
    kernel.wait_for(lambda: "Learning path saved" in html_under(kernel, "dt-path-saved"))
    # Saved, the form's output is the static path: its objectives are in the file (issue 20).
    saved_path = kernel.wait_for(
        lambda: [
            m["content"]["data"]
            for m in kernel.iopub
            if m["header"]["msg_type"] == "update_display_data"
            and m["content"]["transient"]["display_id"].startswith("path-")
        ]
    )[-1]
    assert WIDGET_MIME not in saved_path
    text = shown_text(saved_path)
    assert "Square numbers" in text and "Square roots" in text and "Cubes" in text

    # 2. %tutor learn continues: a turn on the open objective, the standing block in its prompt.
    fake_llm.extend([quiz_reply(QUIZ, "call_learn"), Reply(text="You know your squares.")])
    kernel.execute("%tutor learn")
    card = card_of(kernel)
    system = fake_llm.requests[1].body["messages"][0]["content"]
    assert "[open] square-numbers" in system and "[locked] square-roots" in system
    assert "Teach me the objective 'Square numbers'" in json.dumps(fake_llm.requests[1].body)
    for radio in of_model(kernel, card, "RadioButtonsModel"):
        update(kernel, radio, index=1)
    submit(kernel, card)
    kernel.wait_for(lambda: "You know your squares." in answer_text(kernel), timeout=60)
    assert json.loads(tool_messages(fake_llm, "call_learn")[0]["content"])["score"] == 1.0
    # The saved turn shows the learner's words; the instructions composed for the model (tool
    # names and ids) stay in the request and the trace.
    saved = kernel.wait_for(
        lambda: [
            shown_text(m["content"]["data"])
            for m in kernel.iopub
            if m["header"]["msg_type"] == "update_display_data"
            and "You know your squares." in shown_text(m["content"]["data"])
        ]
    )[-1]
    assert "You: Teach me: Square numbers" in saved and "make_quiz" not in saved

    # 3. Progress: three right answers open the next objective.
    msg = kernel.execute("%tutor progress")
    text = markdown_of(kernel, msg)
    assert "| ✓ | Square numbers |" in text and "| ▶ | Square roots |" in text
    assert "| locked | Cubes |" in text and "`%tutor learn` to work on *Square roots*" in text
    # The chart is an output of its own: in one bundle with the table, only the table showed.
    shown = [m["content"]["data"] for m in kernel.outputs_of(msg) if "data" in m["content"]]
    charts = [d for d in shown if "image/png" in d or "image/svg+xml" in d]
    assert len(charts) == 1 and "text/markdown" not in charts[0]

    # 4. Review: nothing is due right after the quiz; make the cards due, then review them.
    msg = kernel.execute("%tutor review")
    assert "Nothing to review now" in markdown_of(kernel, msg)
    home = tmp_path / "home"
    kernel.execute(
        "import sqlite3\n"
        f"db = sqlite3.connect({str(home / 'state.db')!r})\n"
        "db.execute('update review_cards set due = 0'); db.commit(); db.close()"
    )
    before = len(kernel.with_class("dt-quiz"))
    msg = kernel.execute("%tutor review")
    assert "Review: 3 cards due" in markdown_of(kernel, msg)
    review = kernel.wait_for(lambda: kernel.with_class("dt-quiz")[before:])[0]
    radios = of_model(kernel, review, "RadioButtonsModel")
    assert len(radios) == 3
    for radio in radios:
        update(kernel, radio, index=0)  # all wrong this time
    submit(kernel, review)
    kernel.wait_for(lambda: "Rescheduled" in html_under(kernel, "dt-review-next"), timeout=60)
    # Graded, the review's output is its static receipt: the answers, the score, the next review.
    settled = kernel.wait_for(
        lambda: [
            m["content"]["data"]
            for m in kernel.iopub
            if m["header"]["msg_type"] == "update_display_data"
            and m["content"]["transient"]["display_id"].startswith("review-")
        ]
    )[-1]
    assert WIDGET_MIME not in settled
    text = shown_text(settled)
    assert "score 0%" in text and "your answer: 6" in text and "Rescheduled" in text
    msg = kernel.execute(
        "db = sqlite3.connect(" + repr(str(home / "state.db")) + ")\n"
        "print(db.execute('select count(*) from review_log').fetchone()[0],"
        " db.execute('select count(*) from review_cards').fetchone()[0])"
    )
    assert kernel.stream_text(msg).split() == ["6", "3"]
    # Wrong answers count as evidence too: the gate closes again.
    msg = kernel.execute("%tutor progress")
    assert "| ▶ | Square numbers |" in markdown_of(kernel, msg)
