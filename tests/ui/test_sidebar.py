"""The JupyterLab sidebar in real JupyterLab and Debian's Chromium: the saved-turn renderer with no
kernel, the Tutor panel from the command palette, its Pending tab over the server extension, and
a question asked in the panel streaming its answer over the kernel comm."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from deeptutor_jupyter.interaction.schema import AskUserArgs, payload
from deeptutor_jupyter.knowledge.base import KnowledgeBase
from deeptutor_jupyter.memory import MemoryStore
from deeptutor_jupyter.store.db import PendingRow, Store
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.ui.test_lab import TOKEN, lab_page, needs_chromium, open_notebook, write_notebook

pytestmark = pytest.mark.ui

TRACE_MIME = "application/vnd.deeptutor.trace+json"


def saved_turn_notebook(path: Path) -> None:
    """A notebook as a finished turn leaves it: the widget view, the Markdown and the trace."""
    record = {
        "trace_id": "t_saved1",
        "surface": "notebook",
        "kind": "turn",
        "session_id": "nb-saved-1",
        "turn_id": "turn-saved1",
        "model": "custom/fake-model",
        "started_at": 1780000000.0,
        "finished_at": 1780000004.0,
        "question": "What is an eigenvector?",
        "answer_summary": "A vector whose direction a matrix keeps; it is only scaled.",
        "tools": ["read_notebook", "ask_user"],
        "ask_user": [{"request_id": "ask_1", "tool_call_id": "call_1", "selections": ["safe"]}],
        "status": "done",
        "notebook": "saved.ipynb",
    }
    markdown = "**You:** What is an eigenvector?\n\n**Tutor**: A vector whose direction...\n"
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("%tutor What is an eigenvector?")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                "application/vnd.jupyter.widget-view+json": {
                    "model_id": "0123456789abcdef",
                    "version_major": 2,
                    "version_minor": 0,
                },
                "text/markdown": markdown,
                "text/plain": markdown,
                TRACE_MIME: record,
            },
        )
    ]
    nb.cells = [cell]
    nbformat.write(nb, path)


def open_without_kernel(page: Any, lab: str, name: str) -> None:
    page.goto(f"{lab}/lab/tree/{name}?token={TOKEN}")
    page.wait_for_function(
        "() => window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=60000
    )
    # No kernelspec in the notebook: JupyterLab asks; the answer is "No Kernel".
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(timeout=20000)
    no_kernel = dialog.locator("button", has_text="No Kernel")
    if no_kernel.count():
        no_kernel.first.click()
    else:
        dialog.locator("select").select_option(label="No Kernel")
        dialog.locator("button", has_text="Select").click()
    dialog.wait_for(state="detached")


@needs_chromium
def test_a_saved_turn_renders_without_a_kernel(lab: str, tmp_path: Path) -> None:
    saved_turn_notebook(tmp_path / "saved.ipynb")
    with lab_page("sidebar-trace") as page:
        open_without_kernel(page, lab, "saved.ipynb")
        card = page.locator(".jp-DeepTutorTrace")
        card.wait_for()
        text = card.inner_text()
        kernel = page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel ?? null"
        )
    assert kernel is None
    assert "What is an eigenvector?" in text
    assert "A vector whose direction a matrix keeps; it is only scaled." in text
    assert "read_notebook, ask_user" in text
    assert "safe" in text  # the learner's choice, by option id
    assert "custom/fake-model" in text


def open_tutor(page: Any) -> None:
    """The command palette's "Tutor: open", as a learner would."""
    # JupyterLab's news toast is answered in the lab fixture's settings (tests/ui/test_lab.py).
    # The palette is opened by its command: with no widget focused (a launcher after ``?reset``)
    # Chromium sometimes delivers Ctrl+Shift+C nowhere. What is tested is our palette entry.
    page.evaluate("() => window.jupyterapp.restored.then(() => true)")
    palette = page.locator(".lm-CommandPalette-input")
    # Enter runs the active entry, as a learner does: a click can miss it, since the palette
    # renders its list again whenever a command's state changes (a kernel starting).
    active = page.locator(".lm-CommandPalette-item.lm-mod-active", has_text="Tutor: open")
    for attempt in range(3):
        # The modal palette closes when focus moves, and a freshly reset workspace still
        # moves it (the launcher restoring): the whole gesture is made again, not patched.
        page.evaluate(
            "() => window.jupyterapp.commands.execute('apputils:activate-command-palette')"
        )
        try:
            palette.wait_for(state="visible", timeout=10000)
            palette.fill("Tutor: open", timeout=5000)
            active.first.wait_for(state="visible", timeout=5000)
            palette.press("Enter", timeout=5000)
            page.locator("#deeptutor-panel").wait_for(state="visible", timeout=10000)
            return
        except Exception:
            if attempt == 2:
                raise
            page.keyboard.press("Escape")


def ask_in_panel(page: Any, question: str) -> None:
    """Type a question in the panel's box and press its Ask button."""
    page.locator(".jp-DeepTutorChat-input textarea").fill(question)
    page.locator(".jp-DeepTutorChat-input button", has_text="Ask").click()


def pending_question(home: Path, notebook: str) -> PendingRow:
    """A question whose kernel is alive (this test process stands in for it): an answer given
    in the panel is taken, and that kernel would continue the turn in its own cell."""
    from deeptutor_jupyter.interaction.owners import Owner, register

    store = Store(home / "state.db")
    kernel = Owner.this_process(notebook)
    register(store, kernel)
    session_id = "nb-0123456789-abcdef01"
    store.ensure_session(session_id, notebook)
    args = AskUserArgs.model_validate(
        {
            "title": "Which dataset should we use?",
            "description": "Pick one to continue the exercise.",
            "mode": "single",
            "options": [
                {"id": "iris", "label": "Iris", "recommended": True},
                {"id": "mnist", "label": "MNIST"},
            ],
            "allowCustom": True,
            "submitLabel": "Continue",
        }
    )
    now = time.time()
    body = payload(
        args, request_id="ask_ui_pending", tool_call_id="call_p", session_id=session_id,
        expires_at=now + 3600,
    )  # fmt: skip
    row = PendingRow(
        "ask_ui_pending", session_id, "turn-p", "call_p", body, "pending", now, now + 3600,
        None, None, kernel.id, {"notebook": "datasets.ipynb", "cell": "[4]"},
    )  # fmt: skip
    store.add_pending(row, None)
    store.close()
    return row


@needs_chromium
def test_the_panel_opens_and_lists_a_pending_question(lab: str, tmp_path: Path) -> None:
    row = pending_question(tmp_path / "home", "week3/datasets.ipynb")
    MemoryStore(tmp_path / "home").overwrite(
        "L3", "preferences", "# Preferences\n\n## Style\n\n- Short answers, then an example.\n"
    )
    notes = tmp_path / "notes.md"
    notes.write_text("# Rank\n\nThe rank counts pivots.\n")
    KnowledgeBase(tmp_path / "home", "linalg").add_sources([notes])
    write_notebook(tmp_path / "other.ipynb", "1 + 1")
    with lab_page("sidebar-pending") as page:
        open_notebook(page, lab, "other.ipynb")
        open_tutor(page)
        page.locator(".jp-DeepTutorPanel-tab", has_text="Pending").click()
        card = page.locator(".jp-DeepTutorAsk", has_text="Which dataset should we use?")
        card.wait_for()
        text = card.inner_text()
        assert "in week3/datasets.ipynb" in text  # the last two parts of its path
        assert "recommended" in text
        assert card.locator("button", has_text="Continue").is_disabled()
        card.locator("label", has_text="MNIST").click()
        card.locator("button", has_text="Continue").click()
        # The kernel that asked is alive: the answer is consumed here and the card becomes a
        # receipt (that kernel notices the answer and continues in its own cell).
        outcome = card.locator(".jp-DeepTutorAsk-error, .jp-DeepTutorAsk-receipt")
        outcome.wait_for()
        outcome_text = outcome.inner_text()
        page.locator(".jp-DeepTutorPanel-tab", has_text="Memory").click()
        # Shown as "Your preferences"; the data-doc attribute names the file.
        memory = page.locator(".jp-DeepTutorMemory-doc[data-doc='L3/preferences.md']")
        memory.wait_for()
        memory_text = memory.inner_text()
        memory.locator("button", has_text="Edit").click()
        memory.locator("textarea").fill("# Preferences\n\n## Style\n\n- Long answers.\n")
        memory.locator("button", has_text="Save").click()
        page.locator(".jp-DeepTutorMemory-entry", has_text="Long answers.").wait_for()
        page.locator(".jp-DeepTutorPanel-tab", has_text="Knowledge").click()
        kb = page.locator(".jp-DeepTutorKnowledge-kb", has_text="linalg")
        kb_text = kb.inner_text()
        kb.locator("button", has_text="Remove").click()
        page.locator(".jp-Dialog button", has_text="Remove").click()  # JupyterLab's confirm
        knowledge = page.locator(".jp-DeepTutorKnowledge .jp-DeepTutorPanel-empty").inner_text()
    assert "Short answers, then an example." in memory_text
    saved = MemoryStore(tmp_path / "home").read_text("L3", "preferences")
    assert "Long answers." in saved and "Short answers" not in saved
    assert "1 files" in kb_text
    assert "No knowledge base yet" in knowledge
    assert notes.exists()  # only the index went
    status = Store(tmp_path / "home" / "state.db").get_pending(row.request_id)
    assert status is not None and status.status == "answered"
    assert status.result is not None and status.result["selections"] == ["mnist"]
    assert outcome_text.startswith("Answered: MNIST")


@needs_chromium
def test_a_question_asked_in_the_panel_streams_its_answer(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([Reply(text="A **matrix** is a grid of numbers; its rank counts pivots.")])
    write_notebook(tmp_path / "chat.ipynb", "x = 1")
    with lab_page("sidebar-chat") as page:
        open_notebook(page, lab, "chat.ipynb")
        open_tutor(page)
        page.locator(".jp-DeepTutorChat-input textarea").fill("What is a matrix?")
        page.locator(".jp-DeepTutorChat-input button", has_text="Ask").click()
        turn = page.locator(".jp-DeepTutorChat-turn[data-status='done']")
        turn.wait_for(timeout=60000)
        # The answer's Markdown is rendered by JupyterLab asynchronously, after the status.
        turn.get_by_text("its rank counts pivots.").first.wait_for()
        text = turn.inner_text()
        strong = turn.locator(".jp-DeepTutorChat-markdown strong").inner_text()
    assert "What is a matrix?" in text
    assert "its rank counts pivots." in text
    assert strong == "matrix"  # rendered by JupyterLab's Markdown renderer, not shown raw
    asked = [m for r in fake_llm.requests for m in r.body["messages"] if m["role"] == "user"]
    assert any("What is a matrix?" in json.dumps(m) for m in asked)


@needs_chromium
def test_conversations_are_started_renamed_and_switched_in_the_panel(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([Reply(text="Rank counts pivots."), Reply(text="A loop repeats.")])
    write_notebook(tmp_path / "convs.ipynb", "x = 1")
    with lab_page("sidebar-conversations") as page:
        open_notebook(page, lab, "convs.ipynb")
        open_tutor(page)
        ask = page.locator(".jp-DeepTutorChat-input textarea")
        ask.fill("What is rank?")
        page.locator(".jp-DeepTutorChat-input button", has_text="Ask").click()
        page.locator(".jp-DeepTutorChat-turn[data-status='done']").wait_for(timeout=60000)
        page.locator(".jp-DeepTutorChat-rename").click()
        field = page.locator(".jp-Dialog input")
        field.fill("Linear algebra")
        page.locator(".jp-Dialog button", has_text="Rename").click()
        chooser = page.locator(".jp-DeepTutorChat-conversations")
        chooser.locator("option", has_text="Linear algebra (1)").wait_for(state="attached")
        page.locator(".jp-DeepTutorChat-new").click()
        page.locator(".jp-DeepTutorChat-turn").first.wait_for(state="detached")
        ask.fill("What is a loop?")
        page.locator(".jp-DeepTutorChat-input button", has_text="Ask").click()
        page.locator(".jp-DeepTutorChat-turn[data-status='done']").wait_for(timeout=60000)
        chooser.locator("option", has_text="What is a loop? (1)").wait_for(state="attached")
        options = chooser.locator("option").all_inner_texts()
        chooser.select_option(label="Linear algebra (1)")
        page.get_by_text("Rank counts pivots.").first.wait_for()
        shown = page.locator(".jp-DeepTutorChat-turns").inner_text()
    assert options == ["Linear algebra (1)", "What is a loop? (1)"]
    assert "What is rank?" in shown and "What is a loop?" not in shown
    # The second conversation started without the first one's history.
    sent = json.dumps(fake_llm.requests[1].body["messages"])
    assert "What is rank?" not in sent


def ask_reply(call_id: str, title: str) -> Reply:
    options = [
        {"id": "safe", "label": "Analyse first", "recommended": True},
        {"id": "fast", "label": "Just do it"},
    ]
    args = {"title": title, "mode": "single", "options": options, "submitLabel": "Go on"}
    return Reply(
        text="One question first.", tool_calls=[ToolCallSpec("ask_user", args, id=call_id)]
    )


def tool_result(fake_llm: FakeLLMServer, call_id: str) -> list[dict[str, Any]]:
    return [
        json.loads(m["content"])
        for r in fake_llm.requests
        for m in r.body["messages"]
        if m.get("tool_call_id") == call_id
    ]


@needs_chromium
def test_an_ask_user_form_in_the_panel_continues_the_turn(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([ask_reply("call_panel", "How deep should we go?"), Reply(text="Deep it is.")])
    write_notebook(tmp_path / "form.ipynb", "x = 1")
    with lab_page("sidebar-form") as page:
        open_notebook(page, lab, "form.ipynb")
        open_tutor(page)
        page.locator(".jp-DeepTutorChat-input textarea").fill("Teach me recursion.")
        page.locator(".jp-DeepTutorChat-input textarea").press("Shift+Enter")
        card = page.locator("#deeptutor-panel .jp-DeepTutorAsk", has_text="How deep should we go?")
        card.wait_for()
        assert "recommended" in card.inner_text()
        card.locator("label", has_text="Just do it").click()
        card.locator("button", has_text="Go on").click()
        page.locator(".jp-DeepTutorChat-turn[data-status='done']").wait_for()
        page.locator(".jp-DeepTutorChat-turn").get_by_text("Deep it is.").first.wait_for()
        receipt = card.locator(".jp-DeepTutorAsk-receipt").inner_text()
        answer = page.locator(".jp-DeepTutorChat-turn").inner_text()
    assert receipt == "Answered: Just do it"
    assert "Deep it is." in answer
    # The text before the question stays, above the card, as in the cell.
    assert answer.index("One question first.") < answer.index("How deep") < answer.index("Deep it")
    assert tool_result(fake_llm, "call_panel")[0]["selections"] == ["fast"]


@needs_chromium
def test_a_question_asked_in_a_cell_is_answered_from_the_pending_tab(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([ask_reply("call_cell", "Which way?"), Reply(text="Continued in the cell.")])
    write_notebook(
        tmp_path / "lesson.ipynb", "%load_ext deeptutor_jupyter", "%tutor How should we proceed?"
    )
    with lab_page("sidebar-pending-cell") as page:
        open_notebook(page, lab, "lesson.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.locator(".jp-Notebook").get_by_text("Which way?").first.wait_for()
        open_tutor(page)
        page.locator(".jp-DeepTutorPanel-tab", has_text="Pending").click()
        card = page.locator("#deeptutor-panel .jp-DeepTutorAsk", has_text="Which way?")
        card.wait_for()
        card.locator("label", has_text="Analyse first").click()
        card.locator("button", has_text="Go on").click()
        # The turn goes on in its own cell, not in the panel.
        page.locator(".jp-Notebook").get_by_text("Continued in the cell.").first.wait_for()
        receipt = card.inner_text()
    assert "Answered: Analyse first" in receipt
    assert "The turn continues in" in receipt and "lesson.ipynb" in receipt
    assert tool_result(fake_llm, "call_cell")[0]["selections"] == ["safe"]


@needs_chromium
def test_a_quiz_asked_in_a_cell_is_answered_from_the_pending_tab(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    quiz = {
        "title": "Check 1",
        "objective": "squares",
        "questions": [
            {
                "id": "q1",
                "kind": "choice",
                "prompt": "Which is 2 squared?",
                "options": [{"id": "a", "label": "two"}, {"id": "b", "label": "four"}],
                "answer": ["b"],
            }
        ],
    }
    fake_llm.extend(
        [
            Reply(text="A short check.", tool_calls=[ToolCallSpec("make_quiz", quiz, id="call_q")]),
            Reply(text="Right, on we go in the cell."),
        ]
    )
    write_notebook(tmp_path / "lesson.ipynb", "%load_ext deeptutor_jupyter", "%tutor Quiz me")
    with lab_page("sidebar-pending-quiz") as page:
        open_notebook(page, lab, "lesson.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.locator(".jp-Notebook .dt-quiz").first.wait_for()
        open_tutor(page)
        page.locator(".jp-DeepTutorPanel-tab", has_text="Pending").click()
        card = page.locator("#deeptutor-panel .jp-DeepTutorQuiz", has_text="Which is 2 squared?")
        card.wait_for()
        card.locator("label", has_text="four").click()
        card.locator("button", has_text="Submit answers").click()
        # Graded once; the quiz's turn goes on in its own cell, and the receipt says where.
        page.locator(".jp-Notebook").get_by_text("Right, on we go in the cell.").first.wait_for()
        where = card.locator(".jp-DeepTutorQuiz-where")
        where.wait_for()
        receipt = card.inner_text()
    assert "100%" in receipt
    assert "The turn continues in" in receipt and "lesson.ipynb." in receipt
    result = tool_result(fake_llm, "call_q")[0]
    assert result["score"] == 1.0 and [r["correct"] for r in result["results"]] == [True]


@needs_chromium
def test_explain_this_error_sends_the_traceback(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([Reply(text="You divided by zero: check the denominator.")])
    write_notebook(tmp_path / "oops.ipynb", "numerator = 1\nnumerator / 0")
    with lab_page("sidebar-explain-error") as page:
        open_notebook(page, lab, "oops.ipynb")
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.locator(".jp-OutputArea-output", has_text="ZeroDivisionError").first.wait_for()
        # The cell's context menu offers it because the cell has an error output.
        page.locator(".jp-Cell .jp-InputArea-editor").first.click(button="right")
        page.locator(".lm-Menu-item", has_text="Explain this error").click()
        turn = page.locator(".jp-DeepTutorChat-turn[data-status='done']")
        turn.wait_for(timeout=60000)
        # The answer's Markdown is rendered by JupyterLab asynchronously, after the status.
        turn.get_by_text("You divided by zero").first.wait_for()
        shown = turn.inner_text()
        # The traceback went as the cell's context, through the kernel: its card shows it.
        card = turn.locator("details.jp-DeepTutorChat-context")
        card.locator("summary").click()
        what_it_read = card.inner_text()
    assert "You divided by zero: check the denominator." in shown
    assert "Explain this error" in shown
    assert "cell [1]" in what_it_read
    assert "numerator / 0" in what_it_read and "ZeroDivisionError" in what_it_read
    asked = json.dumps([m for m in fake_llm.requests[0].body["messages"] if m["role"] == "user"])
    assert "ZeroDivisionError" in asked and "numerator / 0" in asked
    assert json.dumps(what_it_read.split("\n", 1)[1].strip())[1:-1] in asked


@needs_chromium
def test_a_page_reload_brings_the_panel_back_as_it_was(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([Reply(chunks=["Vectors ", "add ", "tip to tail."])])
    write_notebook(tmp_path / "reload.ipynb", "y = 2")
    with lab_page("sidebar-reload") as page:
        open_notebook(page, lab, "reload.ipynb")
        open_tutor(page)
        page.locator(".jp-DeepTutorChat-input textarea").fill("How do vectors add?")
        page.locator(".jp-DeepTutorChat-input textarea").press("Shift+Enter")
        page.locator(".jp-DeepTutorChat-turn[data-status='done']").wait_for(timeout=60000)
        page.reload()
        open_notebook(page, lab, "reload.ipynb")
        open_tutor(page)
        turn = page.locator(".jp-DeepTutorChat-turn[data-status='done']")
        turn.wait_for(timeout=60000)
        turn.get_by_text("Vectors add tip to tail.").first.wait_for()
        shown = turn.inner_text()
    assert "How do vectors add?" in shown
    assert "Vectors add tip to tail." in shown
    assert len(fake_llm.requests) == 1  # replayed from the kernel, not asked again


@needs_chromium
def test_with_no_notebook_open_a_scratch_conversation_answers(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([Reply(text="A scratch answer.")])
    with lab_page("sidebar-scratch") as page:
        page.goto(f"{lab}/lab?reset&token={TOKEN}")
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60000)
        open_tutor(page)
        page.locator("#deeptutor-panel button", has_text="Start a scratch conversation").click()
        page.locator(".jp-DeepTutorChat-input textarea").fill("Anything?")
        page.locator(".jp-DeepTutorChat-input button", has_text="Ask").click()
        turn = page.locator(".jp-DeepTutorChat-turn[data-status='done']")
        turn.wait_for(timeout=90000)
        shown = turn.inner_text()
        where = page.locator(".jp-DeepTutorChat-where").inner_text()
    assert "A scratch answer." in shown
    assert "Scratch conversation" in where
    assert not list(tmp_path.glob("*.ipynb"))  # no notebook was created for it


@needs_chromium
def test_the_lab_bundle_benchmark_runs() -> None:
    """Smoke test of benchmarks/lab_bundle.py: it runs and prints its lines; no time asserted."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, str(repo / "benchmarks" / "lab_bundle.py"), "--quick"],
        cwd=str(repo), capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    for line in ("KiB gzipped", "without  extension:", "with     extension:", "ratio", "RESULT:"):
        assert line in out.stdout
    assert "[panel present]" in out.stdout and "[no panel]" in out.stdout


@needs_chromium
def test_an_answer_with_code_keeps_the_box_in_view_and_inserts_into_the_notebook(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """The panel keeps up (issue 21): the question box stays in view below a long answer that
    the panel followed to its end, and a code block has Copy and Insert (a new cell below the
    active one)."""
    code = "def square(x):\n    return x * x"
    body = "\n\n".join(f"Line {i} of a long explanation." for i in range(60))
    fake_llm.extend([Reply(text=f"{body}\n\nTry this [1]:\n\n```python\n{code}\n```\n")])
    write_notebook(tmp_path / "code.ipynb", "x = 1")
    with lab_page("sidebar-code-sources") as page:
        open_notebook(page, lab, "code.ipynb")
        open_tutor(page)
        box = page.locator(".jp-DeepTutorChat-input textarea")
        box.fill("How do I square a number?")
        page.locator(".jp-DeepTutorChat-input button", has_text="Ask").click()
        turn = page.locator(".jp-DeepTutorChat-turn[data-status='done']")
        turn.wait_for(timeout=60000)
        insert = turn.locator(".jp-DeepTutorChat-codeButton", has_text="Insert")
        insert.wait_for()
        copy_shown = turn.locator(".jp-DeepTutorChat-codeButton", has_text="Copy").count()
        panel = page.locator("#deeptutor-panel").bounding_box()
        input_box = box.bounding_box()
        # Followed to the end: the code block at the bottom of the answer is in view.
        insert_box = insert.bounding_box()
        insert.click()
        page.wait_for_function(
            "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells.length"
            " === 2"
        )
        cells = page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells"
            ".map(c => [c.cell_type, c.getSource()])"
        )
    assert copy_shown == 1
    assert panel is not None and input_box is not None and insert_box is not None
    assert input_box["y"] + input_box["height"] <= panel["y"] + panel["height"] + 1  # pinned
    assert insert_box["y"] + insert_box["height"] <= input_box["y"]  # followed, above the box
    assert cells == [["code", "x = 1"], ["code", code]]
