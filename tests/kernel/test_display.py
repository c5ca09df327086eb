"""The saved Markdown of a turn: what a reader of the .ipynb sees without a kernel."""

from __future__ import annotations

from deeptutor_jupyter.agent.events import Content, ErrorEvent, UserInputRequired, UserInputResolved
from deeptutor_jupyter.kernel.display import asked_from_events, turn_markdown
from deeptutor_jupyter.runtime.events import EventLog


def _ask(log: EventLog, request_id: str, mode: str, title: str, options=()) -> None:
    log.emit(
        UserInputRequired(
            id=request_id,
            tool_call_id="call_" + request_id,
            session_id="s1",
            expires_at=2e9,
            title=title,
            mode=mode,
            options=[{"id": i, "label": label} for i, label in options],
        )
    )


def _answer(log: EventLog, request_id: str, selections=(), custom="", **extra) -> None:
    log.emit(
        UserInputResolved(
            id=request_id,
            tool_call_id="call_" + request_id,
            selections=list(selections),
            custom_input=custom,
            cancelled=extra.pop("cancelled", False),
            **extra,
        )
    )


def test_asked_from_events_gives_labels_and_free_text_in_order():
    log = EventLog("t1")
    topics = [("lin", "Linear algebra"), ("prob", "Probability"), ("calc", "Calculus")]
    _ask(log, "a1", "multiple", "Which topics?", topics)
    log.emit(Content(text="thinking about it"))
    _answer(log, "a1", ["lin", "calc"], "also some proofs")
    _ask(log, "a2", "text", "Your level?")
    _answer(log, "a2", custom="first year\nbut rusty")
    _ask(log, "a3", "single", "Go on?", [("y", "Yes"), ("n", "No")])
    _answer(log, "a3", cancelled=True, reason="timeout")
    _ask(log, "a4", "single", "Still waiting?", [("y", "Yes")])

    assert asked_from_events(log.events) == [
        {"title": "Which topics?", "answer": "Linear algebra, Calculus, other: also some proofs"},
        {"title": "Your level?", "answer": "first year\nbut rusty"},
        {"title": "Go on?", "answer": "_not answered in time_"},
        {"title": "Still waiting?", "answer": ""},
    ]


def test_an_empty_checklist_and_an_unknown_id_read_sensibly():
    log = EventLog("t2")
    _ask(log, "b1", "multiple", "Any of these?", [("x", "X")])
    _answer(log, "b1", [])
    _answer(log, "orphan", ["kept_id"])  # its question was not among the events passed
    assert asked_from_events(log.events) == [
        {"title": "Any of these?", "answer": "_none of the options_"},
        {"title": "", "answer": "kept_id"},
    ]


def test_turn_markdown_shows_each_question_and_the_answer():
    asked = [
        {"title": "Which topics?", "answer": "Linear algebra, Calculus"},
        {"title": "Your level?", "answer": "first year\nbut rusty"},
    ]
    md = turn_markdown(
        "Make me a practice set",
        "Here is a practice set on your chosen topics.",
        model="fake",
        status="done",
        tools=["ask_user"],
        asked=asked,
    )
    assert "> **Tutor asked:** Which topics?" in md
    assert "> **You answered:** Linear algebra, Calculus" in md
    assert "> **You answered:** first year\n> but rusty" in md
    # The questions come before the answer that builds on them.
    assert md.index("Which topics?") < md.index("Here is a practice set")


def test_turn_markdown_without_questions_is_unchanged():
    md = turn_markdown("Q", "A", model="m", status="done", tools=[])
    assert "Tutor asked" not in md and md == "**You:** Q\n\n**Tutor** (m):\n\nA\n"


def test_error_cards_show_commands_as_code_not_backticks():
    from deeptutor_jupyter.kernel.widgets.turn_view import error_card

    card = error_card(
        ErrorEvent(
            kind="auth",
            message="The key was rejected <b>401</b>.",
            hint="`%tutor config` shows the key.",
        )
    )
    assert "<code>%tutor config</code> shows the key." in card.value
    assert "`" not in card.value and "&lt;b&gt;401&lt;/b&gt;" in card.value


def test_static_html_keeps_latex_for_mathjax_and_escapes_raw_html():
    from deeptutor_jupyter.kernel.display import WIDGET_MIME, static_bundle

    md = (
        "**You:** eigen?\n\nSo $a*b + c*d$ in $\\{x\\}$ and\n\n$$A v = \\lambda v$$\n\n"
        "<script>x()</script>\n\n```python\ncost = '$5'\n```\n"
    )
    bundle = static_bundle(md, "turn-1")
    page = bundle["text/html"]
    assert WIDGET_MIME not in bundle and "text/markdown" not in bundle
    # The text once: text/plain names the output (its first line), it is not a second copy.
    assert bundle["text/plain"].startswith("You: eigen?") and "lambda" not in bundle["text/plain"]
    assert "<strong>You:</strong>" in page
    assert "$a*b + c*d$" in page and "$\\{x\\}$" in page  # no emphasis, escapes kept
    assert "$$A v = \\lambda v$$" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "cost = &#x27;$5&#x27;" in page or "cost = '$5'" in page
    assert bundle["application/vnd.deeptutor.view+json"]["display_id"] == "turn-1"


def test_the_static_turn_keeps_every_run_of_text_and_a_compact_card_per_tool():
    from deeptutor_jupyter.agent.events import ToolCallFinished, ToolCallStarted
    from deeptutor_jupyter.kernel.display import streamed_answer, tool_cards_from_events

    log = EventLog("t3")
    log.emit(Content(text="Let me look at "))
    log.emit(Content(text="your cell."))
    log.emit(ToolCallStarted(id="c1", name="read_notebook", arguments="{}"))
    log.emit(ToolCallFinished(id="c1", name="read_notebook", content="x" * 900, summary="3 cells"))
    log.emit(ToolCallStarted(id="c2", name="run_code", arguments="{}"))
    log.emit(ToolCallFinished(id="c2", name="run_code", content="boom", is_error=True))
    _ask(log, "a1", "text", "Which line?")
    log.emit(Content(text="Line 3 divides by zero."))
    # Done.answer of such a turn holds only the last round; a stopped one holds nothing.
    assert streamed_answer(log.events) == ("Let me look at your cell.\n\nLine 3 divides by zero.")
    cards = tool_cards_from_events(log.events)
    assert cards == [("read_notebook", "3 cells", False), ("run_code", "", True)]
    md = turn_markdown("Why?", "Line 3", model="m", status="done", tools=[], tool_cards=cards)
    assert "- Tool `read_notebook` · 3 cells" in md and "- ⚠ Tool `run_code` failed" in md
    assert "x" * 100 not in md  # a card, not the tool's output


def test_the_saved_turn_keeps_the_order_it_happened_in():
    """Text written before a question stays before it; a tool card stands where it ran; a
    question shown again after a resume is told once."""
    from deeptutor_jupyter.agent.events import Done, ToolCallFinished, ToolCallStarted
    from deeptutor_jupyter.kernel.start import final_markdown

    log = EventLog("t4")
    log.emit(Content(text="First, one question."))
    log.emit(ToolCallStarted(id="call_a1", name="ask_user", arguments="{}"))
    _ask(log, "a1", "single", "Which level?", [("b", "Beginner"), ("x", "Expert")])
    _ask(log, "a1", "single", "Which level?", [("b", "Beginner"), ("x", "Expert")])  # resumed
    _answer(log, "a1", ["b"])
    log.emit(Content(text="Then let me compute."))
    log.emit(ToolCallStarted(id="c1", name="calculate", arguments="{}"))
    log.emit(ToolCallFinished(id="c1", name="calculate", content="4", summary="2+2 = 4"))
    log.emit(Content(text="So the answer is 4."))
    md = final_markdown(
        log.events, Done(status="done", answer="So the answer is 4."), "Q?", "m", []
    )
    order = [
        "**You:** Q?",
        "**Tutor** (m):",
        "First, one question.",
        "> **Tutor asked:** Which level?",
        "> **You answered:** Beginner",
        "Then let me compute.",
        "- Tool `calculate` · 2+2 = 4",
        "So the answer is 4.",
    ]
    at = [md.index(part) for part in order]
    assert at == sorted(at), md
    assert md.count("Which level?") == 1 and md.count("So the answer is 4.") == 1


def test_an_answer_that_was_not_streamed_is_still_saved():
    from deeptutor_jupyter.agent.events import Done
    from deeptutor_jupyter.kernel.start import final_markdown

    md = final_markdown([], Done(status="done", answer="All in one piece."), "Q?", "m", [])
    assert "**Tutor** (m):\n\nAll in one piece." in md


def test_static_html_is_lean_and_keeps_code_lines():
    """The final update is a turn's largest message (issue 28): no line break between tags and
    no language class on code; a code block keeps its own lines and an answer like the
    benchmark's costs little more than its Markdown."""
    import json

    from benchmarks.streaming_bytes import make_answer
    from deeptutor_jupyter.kernel.display import markdown_html

    page = markdown_html("Look:\n\n- one\n- two\n\n```python\nx = 1\n\ny = '<b>'\n```\n")
    assert page == (
        '<div class="dt-static"><p>Look:</p><ul><li>one</li><li>two</li></ul>'
        "<pre><code>x = 1\n\ny = '&lt;b&gt;'\n</code></pre>\n</div>"
    )
    answer = make_answer(20_000)
    assert len(json.dumps(markdown_html(answer))) < 1.08 * len(json.dumps(answer))
