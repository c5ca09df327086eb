"""A finished turn's output needs no widget model (issue 20, "two lives of an output").

While a turn runs the cell shows live widgets; when it ends the final ``update_display_data``
replaces them with Markdown and the same as HTML. A notebook reopened the next day (a new
kernel, no kernel, nbconvert, GitHub) then shows the answer, the learner's choices by label,
their typed text and the quiz with its score, never "Error displaying widget: model not found".
Real kernel, FakeLLMServer; the notebook file is built from iopub as a frontend would save it.
"""

from __future__ import annotations

import json
from typing import Any

import nbformat
import pytest
from nbconvert import HTMLExporter, MarkdownExporter

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.e2e.kernel_driver import KernelDriver, shown_text
from tests.e2e.test_ask_user_kernel import ask, button, card_of, inside, update
from tests.learning.test_quiz_kernel import EXPLANATION, QUIZ, of_model, quiz_reply, submit

pytestmark = pytest.mark.e2e

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
LATEX_ANSWER = (
    "An eigenvalue $\\lambda$ of $A$ satisfies\n\n$$A v = \\lambda v$$\n\nfor some $v_1 \\neq 0$."
)
TYPED = "my own words: 张老师 42"


def cell_outputs(k: KernelDriver, msg_id: str) -> list[dict[str, Any]]:
    """The outputs a frontend keeps for one cell: displays, with updates applied by display id."""
    outputs: list[dict[str, Any]] = []
    ids: dict[str, list[int]] = {}
    for m in k.iopub:
        kind, content = m["header"]["msg_type"], m["content"]
        display_id = (content.get("transient") or {}).get("display_id")
        if kind == "display_data" and m["parent_header"].get("msg_id") == msg_id:
            if display_id:
                ids.setdefault(display_id, []).append(len(outputs))
            outputs.append(
                nbformat.v4.new_output(
                    "display_data", data=content["data"], metadata=content["metadata"]
                )
            )
        elif kind == "update_display_data" and display_id in ids:
            for index in ids[display_id]:
                outputs[index]["data"] = content["data"]
                outputs[index]["metadata"] = content["metadata"]
    return outputs


def final_bundle(k: KernelDriver, msg_id: str) -> dict[str, Any]:
    """The turn's output once the turn has ended (it has no widget view any more)."""
    return dict(
        k.wait_for(
            lambda: [
                o["data"]
                for o in cell_outputs(k, msg_id)
                if "text/html" in o["data"] and WIDGET_MIME not in o["data"]
            ],
            timeout=60,
        )[0]
    )


def three_turns(kernel: KernelDriver, fake_llm: FakeLLMServer) -> dict[str, str]:
    """A plain answer with LaTeX, a question answered with a choice and typed text, a quiz
    answered in the cell: ``{msg_id: cell source}``, once each turn has ended."""
    # 1. a plain answer with LaTeX
    fake_llm.extend([Reply(text=LATEX_ANSWER)])
    plain = kernel.execute("%tutor What is an eigenvalue?")
    # 2. an ask_user question answered with a choice and typed text
    fake_llm.extend([ask("multiple", allowCustom=True), Reply(text="Good: we analyse first.")])
    final_bundle(kernel, plain)
    asked = kernel.execute("%tutor Help me with my project")
    card = card_of(kernel)
    update(kernel, inside(kernel, card, "CheckboxModel")[0], value=True)
    update(kernel, inside(kernel, card, "TextModel")[0], value=TYPED)
    kernel.click(button(kernel, card, "dt-ask-submit"))
    final_bundle(kernel, asked)
    # 3. a quiz answered in the cell
    fake_llm.extend([quiz_reply(QUIZ), Reply(text="Nice work on squares.")])
    quiz = kernel.execute("%tutor Quiz me on squares")
    form = str(kernel.wait_for(lambda: kernel.with_class("dt-quiz"))[0])
    update(kernel, of_model(kernel, form, "RadioButtonsModel")[0], index=1)
    update(kernel, of_model(kernel, form, "TextModel")[0], value="3.001 m/s")
    update(kernel, of_model(kernel, form, "AnyModel")[0], value="def sq(x):\n    return x * x\n")
    submit(kernel, form)
    turns = {
        plain: "%tutor What is an eigenvalue?",
        asked: "%tutor Help me with my project",
        quiz: "%tutor Quiz me on squares",
    }
    for msg_id in turns:
        final_bundle(kernel, msg_id)
    return turns


def saved_notebook(kernel: KernelDriver, turns: dict[str, str]) -> nbformat.NotebookNode:
    """The notebook as a frontend saves it: each cell with its outputs, updates applied."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    for msg_id, source in turns.items():
        cell = nbformat.v4.new_code_cell(source)
        cell["outputs"] = cell_outputs(kernel, msg_id)
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def test_finished_turns_are_static_markdown_and_html_and_convert_with_nbconvert(
    kernel: KernelDriver, fake_llm: FakeLLMServer
) -> None:
    turns = three_turns(kernel, fake_llm)
    plain, asked, quiz = turns
    expected = {
        plain: ["What is an eigenvalue?", "$\\lambda$", "$$A v = \\lambda v$$", "$v_1 \\neq 0$"],
        # The text before the question is kept too (Done.answer holds only the last round).
        asked: ["One question first.", "How should we proceed?", "Analyse first", "张老师 42"],
        quiz: ["Which is 2 squared?", "four", "3.001 m/s", "return x * x", "score 100%"],
    }
    expected[quiz] += [EXPLANATION, "A short check.", "Nice work on squares."]
    expected[asked] += ["we analyse first"]
    for msg_id, words in expected.items():
        bundle = final_bundle(kernel, msg_id)
        assert "text/html" in bundle and WIDGET_MIME not in bundle
        for word in words:
            assert word in shown_text(bundle), (word, bundle["text/html"])
    plain_html = final_bundle(kernel, plain)["text/html"]
    assert "<p>An eigenvalue" in plain_html  # Markdown rendered, math kept for MathJax
    # The learner's choice by its label, not the option id ("safe").
    assert "You answered: Analyse first, other: " + TYPED in shown_text(final_bundle(kernel, asked))

    # The saved notebook, as nbconvert (and GitHub, nbviewer) shows it with no kernel.
    nb = saved_notebook(kernel, turns)
    for cell in nb.cells:
        for output in cell["outputs"]:
            data = output.get("data", {})
            assert WIDGET_MIME not in data or "text/html" in data or "text/markdown" in data
    page, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    for word in ("$\\lambda$", "Analyse first", "张老师 42", "four", "score 100%", EXPLANATION):
        assert word in page, word
    assert "Error displaying widget" not in page
    assert WIDGET_MIME not in page  # no output left that only a live widget model could show
    text, _ = MarkdownExporter().from_notebook_node(nb)
    for word in ("$\\lambda$", "Analyse first", "张老师 42", "score 100%"):
        assert word in text, word

    # The last display update of a turn carries the answer once (issue 28: Markdown, HTML and
    # plain text each held it, 3.35x the answer's bytes): HTML only, plain text a pointer.
    long_answer = " ".join(f"Sentence {i} of a long answer about eigenvalues." for i in range(80))
    fake_llm.add(Reply(text=long_answer))
    final = final_bundle(kernel, kernel.execute("%tutor Tell me all of it."))
    tail = long_answer[-300:]
    assert [mime for mime, value in final.items() if tail in json.dumps(value)] == ["text/html"]
    assert len(final["text/plain"]) < 200 and "Tell me all of it." in final["text/plain"]
