"""The quiz card (driven from code, no browser), the learning store, progress text."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from deeptutor_jupyter.kernel.progress import forecast, progress_markdown
from deeptutor_jupyter.kernel.widgets.quiz_card import (
    QuizCard,
    form_markdown,
    receipt_markdown,
)
from deeptutor_jupyter.learning.mastery import Mastery
from deeptutor_jupyter.learning.path import path_from_lines
from deeptutor_jupyter.learning.quiz import MakeQuizArgs, QuizOutcome, public_view
from deeptutor_jupyter.store.learning import LearningStore, QuizRow
from tests.learning.test_quiz import ISSUE_EXAMPLE


def body() -> dict[str, Any]:
    return {
        "id": "quiz_1",
        "tool_call_id": "c1",
        "session_id": "s",
        **public_view(MakeQuizArgs.model_validate(ISSUE_EXAMPLE)),
    }


def all_state(root: widgets.Widget) -> str:
    """Every trait of every widget under root, as the browser would receive them."""
    seen, stack, states = set(), [root], []
    while stack:
        w = stack.pop()
        if id(w) in seen:
            continue
        seen.add(id(w))
        states.append(w.get_state())
        stack += [c for c in getattr(w, "children", ()) if isinstance(c, widgets.Widget)]
    return json.dumps(states, default=str)


def test_the_card_has_a_control_per_kind_and_no_answers():
    card = QuizCard(body())
    kinds = {qid: how for qid, (how, _c, _i) in card.controls.items()}
    assert kinds == {"q1": "single", "q2": "text", "q3": "text", "q4": "text"}
    state = all_state(card)
    assert "REF-TEXT" not in state and "assert f(2)" not in state and "Because B." not in state
    assert "def f(x)" in state and "m/s" in state


def test_submit_sends_the_answers_once_and_then_shows_the_receipt():
    sent: list[tuple[dict[str, Any], float]] = []
    card = QuizCard(body(), on_submit=lambda answers, seconds: sent.append((answers, seconds)))
    _how, radio, _ = card.controls["q1"]
    radio.value = "b"
    card.controls["q2"][1].value = "3 m/s"
    card.submit_button.click()  # q3 and q4 are blank: it asks first
    assert sent == []
    card.submit_button.click()  # the second click submits anyway
    card.submit_button.click()  # a third sends nothing more
    assert len(sent) == 1 and sent[0][0]["q1"] == ["b"] and sent[0][0]["q2"] == "3 m/s"
    assert sent[0][0]["q4"].startswith("def f(x)")  # the starter, unchanged
    card.show_error("q2: not a number")
    assert card.state == "open" and "not a number" in card.error.value
    result = QuizOutcome.model_validate(
        {
            "score": 0.5,
            "results": [
                {"id": "q1", "correct": True, "given": ["b"], "feedback": "Correct. Because B."},
                {
                    "id": "q3",
                    "correct": False,
                    "given": "x",
                    "feedback": "No.",
                    "graded_by": "graded by the tutor",
                },
            ],
        }
    )
    card.show_receipt(result)
    text = all_state(card)
    assert (
        card.state == "graded" and "Because B." in text and text.count("graded by the tutor") == 1
    )
    md = receipt_markdown(body(), result)
    assert "score 50%" in md and "✓ **right**" in md and "✗ **wrong**" in md
    assert "_(graded by the tutor)_" in md


def test_submit_with_blanks_asks_first_and_go_back_keeps_the_form_open():
    sent: list[dict[str, Any]] = []
    card = QuizCard(body(), on_submit=lambda answers, seconds: sent.append(answers))
    assert card.confirm.layout.display == "none"
    card.controls["q1"][1].value = "b"
    card.submit_button.click()
    # q2, q3 empty and q4 the starter unchanged: three of four blank, said in words, not sent.
    assert sent == [] and card.state == "open" and card.confirm.layout.display == "flex"
    assert "3 of 4 questions are not answered" in card.confirm_text.value
    card.back_button.click()
    assert card.confirm.layout.display == "none" and sent == []
    card.controls["q2"][1].value = "3 m/s"
    card.submit_button.click()  # asks again: two still blank
    assert sent == [] and "2 of 4" in card.confirm_text.value
    card.anyway_button.click()
    assert len(sent) == 1 and card.state == "submitted" and card.confirm.layout.display == "none"


def test_a_full_form_submits_at_once_and_blanks_show_as_not_answered():
    sent: list[dict[str, Any]] = []
    card = QuizCard(body(), on_submit=lambda answers, seconds: sent.append(answers))
    card.controls["q1"][1].value = "b"
    card.controls["q2"][1].value = "3"
    card.controls["q3"][1].value = "x"
    card.controls["q4"][1].value = "def f(x):\n    return 1"
    card.submit_button.click()
    assert len(sent) == 1 and card.confirm.layout.display == "none"
    result = QuizOutcome.model_validate(
        {
            "score": 0.0,
            "results": [
                {
                    "id": "q2",
                    "correct": False,
                    "given": "",
                    "feedback": "Not answered.",
                    "answered": False,
                },
            ],
        }
    )
    card.show_receipt(result)
    assert "(not answered)" in all_state(card) and "✗" not in all_state(card)
    md = receipt_markdown(body(), result)
    assert "your answer: (not answered)" in md and "❌" not in md


def test_the_card_and_its_receipt_speak_the_learners_language():
    sent: list[dict[str, Any]] = []
    card = QuizCard(body(), on_submit=lambda answers, seconds: sent.append(answers), language="zh")
    assert (card.submit_button.description, card.back_button.description) == ("提交答案", "返回")
    card.submit_button.click()
    assert "4 道题中有 4 道未作答" in card.confirm_text.value and sent == []
    result = QuizOutcome.model_validate(
        {"score": 0.0, "results": [{"id": "q2", "correct": False, "given": "", "answered": False}]}
    )
    card.show_receipt(result, where="b.ipynb")
    text = json.dumps(json.loads(all_state(card)), ensure_ascii=False)
    assert "得分 0%" in text and "（未作答）" in text and "导师在 b.ipynb 继续" in text
    assert "score" not in text and "Your answer" not in text


def test_code_and_latex_in_prompts_render():
    quiz = json.loads(json.dumps(ISSUE_EXAMPLE))
    quiz["questions"][0]["prompt"] = "What does `len(x)` give for $x = [1, 2]$?"
    b = {"id": "q", "session_id": "s", **public_view(MakeQuizArgs.model_validate(quiz))}
    card = QuizCard(b)
    prompt = card.children[1].children[0]
    assert isinstance(prompt, widgets.HTMLMath)
    assert "<code>len(x)</code> give for $x = [1, 2]$?" in prompt.value


def test_multiple_answers_use_checkboxes():
    quiz = json.loads(json.dumps(ISSUE_EXAMPLE))
    quiz["questions"][0]["answer"] = ["a", "b"]
    b = {"id": "q", "session_id": "s", **public_view(MakeQuizArgs.model_validate(quiz))}
    sent: list[Any] = []
    card = QuizCard(b, on_submit=lambda answers, seconds: sent.append(answers))
    how, boxes, _ids = card.controls["q1"]
    assert how == "multiple" and all(isinstance(x, widgets.Checkbox) for x in boxes)
    boxes[1].value = True
    card.submit(confirmed=True)
    assert sent[0]["q1"] == ["b"]
    assert "Eigenvalues, check 1" in form_markdown(b) and '"answer"' not in form_markdown(b)


def row(quiz_id: str, expires_in: float = 3600) -> QuizRow:
    now = time.time()
    spec = {"quiz": ISSUE_EXAMPLE}
    return QuizRow(
        quiz_id, "s", "t", "c", "tool", "eigen", spec, "pending", now, now + expires_in, None, None
    )


def test_a_quiz_is_kept_with_its_answers_and_its_record_follows_the_outcome(tmp_path: Path):
    one, two = LearningStore(tmp_path / "state.db"), LearningStore(tmp_path / "state.db")
    try:
        one.add_quiz(row("quiz_a"))
        assert two.get_quiz("quiz_a").spec["quiz"]["title"] == "Eigenvalues, check 1"
        one.finish_quiz("quiz_a", "answered", {"score": 1})
        assert two.get_quiz("quiz_a").result == {"score": 1}
        assert [r.quiz_id for r in two.quiz_history()] == ["quiz_a"]
    finally:
        one.close()
        two.close()


def test_paths_continue_across_notebooks_and_topics(tmp_path: Path):
    store = LearningStore(tmp_path / "state.db")
    try:
        first = path_from_lines("Algebra", "Groups\nRings")
        second = path_from_lines("Calculus", "Limits")
        store.save_path("p1", "Algebra", first.model_dump())
        store.save_path("p2", "Calculus", second.model_dump())
        assert store.latest_path()[0] == "p2"
        store.touch_path("p1")
        assert store.latest_path()[0] == "p1"
        assert store.path_by_topic("calculus")[0] == "p2"
    finally:
        store.close()


def test_progress_text_names_the_next_step():
    path = path_from_lines("Algebra", "Groups\nRings")
    text = progress_markdown(path, {"groups": Mastery(0.9, 4)}, [0, 2, 0], 0)
    assert "| ✓ | Groups | 90% |" in text and "| ▶ | Rings | – |" in text
    assert "`%tutor learn` to work on *Rings*" in text and "2 in the next 7 days" in text
    assert "No learning path yet" in progress_markdown(None, {}, [], 0)


def test_forecast_counts_cards_per_day(tmp_path: Path):
    store = LearningStore(tmp_path / "state.db")
    try:
        now = time.time()
        for offset in (-100.0, 3600.0, 2.5 * 86400):
            card_id = store.new_card_id("o", {"id": "q"})
            store.save_card(card_id, {"card_id": card_id}, now + offset, 3, {})
        assert forecast(store, days=4, now=now) == [2, 0, 1, 0]
    finally:
        store.close()


def test_progress_chart_is_a_png_and_leaves_pyplot_alone():
    import pytest

    pytest.importorskip("matplotlib")
    import sys

    from deeptutor_jupyter.kernel.progress import progress_png

    had_pyplot = "matplotlib.pyplot" in sys.modules
    path = path_from_lines("Algebra", "Groups\nRings")
    png = progress_png(path, {"groups": Mastery(0.9, 4)}, [1, 0, 2])
    assert png is not None and png.startswith(b"\x89PNG\r\n\x1a\n")
    assert ("matplotlib.pyplot" in sys.modules) == had_pyplot


def test_the_next_review_reads_as_words_not_day_s():
    from deeptutor_jupyter.kernel.quiz_cards import time_until

    now = time.time()
    assert time_until(now + 86400 + 60) == "in 1 day"
    assert time_until(now + 3 * 86400 + 60) == "in 3 days"


def test_without_matplotlib_the_progress_chart_is_an_svg_output_of_its_own(tmp_path, monkeypatch):
    import sys
    import xml.etree.ElementTree as ET

    from deeptutor_jupyter.kernel.progress import progress_outputs

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails: not installed
    store = LearningStore(tmp_path / "state.db")
    try:
        store.save_card(store.new_card_id("o", {"id": "q"}), {}, time.time() + 3600, 3, {})
        chart, table = progress_outputs(store)
    finally:
        store.close()
    assert "image/png" not in chart and "text/markdown" not in chart
    svg = ET.fromstring(chart["image/svg+xml"])
    assert svg.tag.endswith("svg") and len(svg.findall("{http://www.w3.org/2000/svg}rect")) == 14
    assert "Review:" in table["text/markdown"] and "image/svg+xml" not in table
