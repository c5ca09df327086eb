"""Real JupyterLab in headless Chromium: the turn view renders, the form is clickable, and the
saved notebook keeps the answer as Markdown (update_display_data reaches a finished cell)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from deeptutor_jupyter.testing.ports import free_port
from tests.e2e.kernel_driver import shown_text

pytestmark = pytest.mark.ui

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TOKEN = "ui-test-token"
ARTIFACTS = Path(__file__).resolve().parents[2] / "tests" / "ui" / "artifacts"


@pytest.fixture
def lab(tmp_path: Path, fake_llm: FakeLLMServer) -> Iterator[str]:
    with lab_server(tmp_path, fake_llm) as url:
        yield url


@contextmanager
def lab_server(tmp_path: Path, fake_llm: FakeLLMServer, app: str = "jupyterlab") -> Iterator[str]:
    """JupyterLab serving tmp_path; a second one on the same folder is "the next day".
    ``app="notebook"`` serves Notebook 7 instead."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPTUTOR_")}
    env.update(
        DEEPTUTOR_HOME=str(tmp_path / "home"),
        DEEPTUTOR_PROVIDER="custom",
        DEEPTUTOR_BASE_URL=fake_llm.url,
        DEEPTUTOR_MODEL="fake-model",
        DEEPTUTOR_AUTO_CONSOLIDATE="false",
        JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
        IPYTHONDIR=str(tmp_path / "ipython"),
    )
    # JupyterLab asks whether to fetch its news in a toast that covers the panel's Ask button
    # (bottom right): the learner's answer, "no", is given here.
    notification = tmp_path / "jupyter-config" / "lab" / "user-settings" / "@jupyterlab"
    notification = notification / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True, exist_ok=True)
    notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    log = (tmp_path / "lab.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", app, "--no-browser", "--allow-root",
            f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={tmp_path}",
            *(["--LabApp.expose_app_in_browser=True", "--LabApp.news_url="]
              if app == "jupyterlab" else []),
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError((tmp_path / "lab.log").read_text()) from None
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def write_notebook(path: Path, *sources: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)


needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Chromium is installed by scripts/test.sh"
)
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def open_notebook(page: Any, lab: str, name: str) -> None:
    page.goto(f"{lab}/lab/tree/{name}?token={TOKEN}")
    page.wait_for_function(
        "() => window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=60000
    )
    # JupyterLab may ask which kernel to start (the notebook's own is preselected): answer the
    # dialog if it comes, and go on once the notebook's kernel is ready and idle, rather than
    # waiting a fixed time for a dialog that mostly never comes.
    ready = """() => {
      if ([...document.querySelectorAll('.jp-Dialog button')].some(
            (b) => b.textContent.includes('Select'))) return 'dialog';
      const context = window.jupyterapp.shell.currentWidget?.sessionContext;
      const kernel = context?.session?.kernel;
      return context?.isReady && kernel && kernel.status === 'idle' ? 'ready' : false;
    }"""
    deadline = time.monotonic() + 60
    while page.wait_for_function(ready, timeout=60000).json_value() == "dialog":
        page.locator(".jp-Dialog button", has_text="Select").first.click()
        if time.monotonic() > deadline:
            raise AssertionError("the kernel dialog kept coming back")
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60000)


@contextmanager
def lab_page(name: str) -> Iterator[Any]:
    """A Chromium page; its screenshot lands in tests/ui/artifacts/<name>(-failure).png."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.set_default_timeout(30000)
        try:
            yield page
            page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        except Exception:
            page.screenshot(path=str(ARTIFACTS / f"{name}-failure.png"), full_page=True)
            raise
        finally:
            browser.close()


def wait_for_final_bundle(page: Any, cell: int, text: str) -> None:
    """Until the open notebook's model holds the turn's final bundle in ``cell``: the kernel
    sends it after the answer's last delta (with the trace), so seeing the text on the page is
    not enough before a save."""
    page.wait_for_function(
        """([cell, text]) => {
            const model = window.jupyterapp.shell.currentWidget?.content?.model;
            const outputs = model?.cells.get(cell)?.toJSON().outputs ?? [];
            // A finished turn carries its text once, as HTML (kernel/display.py static_bundle).
            const text_of = value => (Array.isArray(value) ? value.join('') : (value ?? ''));
            return outputs.some(o => {
                const html = text_of(o.data?.['text/html']).replace(/<[^>]+>/g, '');
                const shown = text_of(o.data?.['text/markdown']) + html;
                return shown.includes(text) && o.data['application/vnd.deeptutor.trace+json'];
            });
        }""",
        arg=[cell, text],
    )


def save_until_on_disk(page: Any, path: Path, text: str, timeout: float = 30.0) -> None:
    """Save the open notebook and wait until the file holds ``text`` (the save is async)."""
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    deadline = time.monotonic() + timeout
    while text not in path.read_text(encoding="utf-8"):
        assert time.monotonic() < deadline, f"{text!r} never reached {path.name}"
        time.sleep(0.1)


def ask_reply(call_id: str) -> Reply:
    options = [
        {"id": "safe", "label": "Analyse first", "recommended": True},
        {"id": "fast", "label": "Just do it"},
    ]
    args = {"title": "Which way?", "mode": "single", "options": options}
    return Reply(
        text="First, one question.", tool_calls=[ToolCallSpec("ask_user", args, id=call_id)]
    )


@needs_chromium
def test_a_live_card_survives_a_page_reload(lab: str, fake_llm: FakeLLMServer, tmp_path: Path):
    fake_llm.extend([ask_reply("call_reload"), Reply(text="Answered after the reload.")])
    write_notebook(
        tmp_path / "reload.ipynb", "%load_ext deeptutor_jupyter", "%tutor How should we proceed?"
    )
    with lab_page("lab-reload") as page:
        open_notebook(page, lab, "reload.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.get_by_text("Which way?").wait_for()
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_timeout(1000)
        page.reload()
        open_notebook(page, lab, "reload.ipynb")
        # The card comes back from the live kernel's widget models and still answers.
        page.locator(".dt-ask-user label", has_text="Just do it").first.click()
        page.locator(".dt-ask-submit").click()
        page.get_by_text("Answered after the reload.").wait_for()

    sent = [
        m
        for r in fake_llm.requests
        for m in r.body["messages"]
        if m.get("tool_call_id") == "call_reload"
    ]
    assert len(sent) == 1 and json.loads(sent[0]["content"])["selections"] == ["fast"]


@needs_chromium
def test_a_turn_and_a_form_in_real_jupyterlab(lab: str, fake_llm: FakeLLMServer, tmp_path: Path):
    fake_llm.extend(
        [
            Reply(text="An **eigenvector** keeps its direction."),
            ask_reply("call_ui_1"),
            Reply(text="Good: we analyse first."),
        ]
    )
    write_notebook(
        tmp_path / "lesson.ipynb",
        "%load_ext deeptutor_jupyter",
        "%tutor What is an eigenvector?",
        "%tutor How should we proceed?",
    )
    with lab_page("lab-turn") as page:
        open_notebook(page, lab, "lesson.ipynb")
        # Not awaited: the command's promise settles only when every cell has run.
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.get_by_text("An eigenvector keeps its direction.").wait_for()
        page.get_by_text("Which way?").wait_for()
        page.locator(".dt-ask-user label", has_text="Analyse first").first.click()
        page.locator(".dt-ask-submit").click()
        # The turn has ended: the form and its receipt became the static rendering.
        page.locator(".dt-static", has_text="Good: we analyse first.").wait_for()
        assert "Analyse first" in page.locator(".dt-static").last.inner_text()
        wait_for_final_bundle(page, 1, "An eigenvector keeps its direction.")
        wait_for_final_bundle(page, 2, "Good: we analyse first.")
        save_until_on_disk(page, tmp_path / "lesson.ipynb", "Good: we analyse first.")

    sent = [
        m
        for r in fake_llm.requests
        for m in r.body["messages"]
        if m.get("tool_call_id") == "call_ui_1"
    ]
    assert json.loads(sent[0]["content"])["selections"] == ["safe"]
    saved = json.loads((tmp_path / "lesson.ipynb").read_text())
    first_turn = saved["cells"][1]["outputs"]
    shown = saved_markdown(first_turn)
    # The final bundle replaced the "answering…" placeholder after the cell had finished.
    assert "An eigenvector keeps its direction." in shown, first_turn
    assert "<strong>eigenvector</strong>" in "".join(
        "".join(o.get("data", {}).get("text/html", "")) for o in first_turn
    )
    # The ask_user turn's Markdown says what was asked and which option the learner chose.
    asked = saved_markdown(saved["cells"][2]["outputs"])
    assert "Good: we analyse first." in asked and "Which way?" in asked, asked
    assert "Analyse first" in asked, asked


def saved_markdown(outputs: list[dict[str, Any]]) -> str:
    """The text the saved outputs show (Markdown, or a finished turn's HTML without tags)."""

    def joined(data: dict[str, Any]) -> dict[str, Any]:
        # nbformat stores multi-line strings as lists of lines
        return {k: "".join(v) if isinstance(v, list) else v for k, v in data.items()}

    return "".join(shown_text(joined(o.get("data", {}))) for o in outputs)


@needs_chromium
def test_an_answer_given_after_a_kernel_restart_is_in_the_saved_file(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
):
    fake_llm.extend([ask_reply("call_after_restart"), Reply(text="Resumed: analysing first.")])
    write_notebook(
        tmp_path / "resume.ipynb", "%load_ext deeptutor_jupyter", "%tutor How should we proceed?"
    )
    nb = "window.jupyterapp.shell.currentWidget"
    with lab_page("lab-answer-after-restart") as page:
        open_notebook(page, lab, "resume.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.get_by_text("Which way?").wait_for()
        page.evaluate("() => { window.jupyterapp.commands.execute('kernelmenu:restart'); }")
        page.locator(".jp-Dialog button", has_text="Restart").click()
        page.get_by_text("%tutor pending").first.wait_for()
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
        # A new cell, as the learner would add it, answers the question in the new kernel.
        page.evaluate(
            f"""() => {{
                {nb}.content.activeCellIndex = 1;
                return window.jupyterapp.commands.execute('notebook:insert-cell-below');
            }}"""
        )
        page.evaluate(
            f"() => {nb}.content.activeCell.model.sharedModel.setSource("
            "'%load_ext deeptutor_jupyter\\n%tutor pending')"
        )
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-cell'); }")
        card = page.locator(".jp-Cell").nth(2).locator(".dt-ask-user")
        card.locator("label", has_text="Analyse first").first.click()
        card.locator(".dt-ask-submit").click()
        page.get_by_text("Resumed: analysing first.").first.wait_for()
        page.wait_for_timeout(1500)  # the final bundles follow the last delta
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_timeout(1000)
    saved = json.loads((tmp_path / "resume.ipynb").read_text())
    answered_in = saved_markdown(saved["cells"][2]["outputs"])
    asked_in = saved_markdown(saved["cells"][1]["outputs"])
    assert "Resumed: analysing first." in answered_in, answered_in
    # The cell that asked is replaced by its display id, which the lab extension applies.
    assert "Resumed: analysing first." in asked_in, asked_in


@needs_chromium
def test_after_a_kernel_restart_a_dead_form_gives_way_to_what_to_do(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
):
    fake_llm.extend([ask_reply("call_restart")])
    write_notebook(
        tmp_path / "restart.ipynb", "%load_ext deeptutor_jupyter", "%tutor How should we proceed?"
    )
    with lab_page("lab-restart") as page:
        open_notebook(page, lab, "restart.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.get_by_text("Which way?").wait_for()
        assert page.locator(".dt-ask-submit").count() == 1
        page.evaluate("() => { window.jupyterapp.commands.execute('kernelmenu:restart'); }")
        page.locator(".jp-Dialog button", has_text="Restart").click()
        # The live-looking form (its kernel is gone) is replaced by the saved Markdown, which
        # says how to answer the question now.
        page.get_by_text("%tutor pending").first.wait_for()
        assert page.locator(".dt-ask-submit").count() == 0
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_timeout(1000)
    saved = nbformat.read(tmp_path / "restart.ipynb", as_version=4)
    bundles = [o.get("data", {}) for o in saved.cells[1].outputs]
    assert bundles and all("application/vnd.jupyter.widget-view+json" not in b for b in bundles)
    assert any("%tutor pending" in b.get("text/markdown", "") for b in bundles)


@needs_chromium
def test_a_turn_that_ends_after_a_page_reload_is_saved_with_its_answer_and_trace(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
):
    words = [f"word{i} " for i in range(12)]
    resume = threading.Event()  # the answer waits mid-way until the page has reloaded
    chunks = ["Streaming: ", *words, "the end."]
    fake_llm.add(Reply(chunks=chunks, chunk_delay=0.3, hold_after=3, hold=resume))
    write_notebook(
        tmp_path / "streaming.ipynb", "%load_ext deeptutor_jupyter", "%tutor Tell me slowly"
    )
    with lab_page("lab-reload-streaming") as page:
        open_notebook(page, lab, "streaming.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.get_by_text("Streaming:").first.wait_for()
        # Saved mid-answer (as autosave does), then reloaded while the answer still streams.
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_timeout(500)
        page.reload()
        open_notebook(page, lab, "streaming.ipynb")
        # The reloaded page shows all the text so far, once: the model's state holds it
        # (kernel/widgets/answer_stream.py), and deltas go on from there.
        so_far = "".join(chunks[:3]).strip()
        page.wait_for_function(
            "(t) => document.querySelector('.dt-answer')?.innerText.trim() === t", arg=so_far
        )
        page.screenshot(path=str(ARTIFACTS / "lab-reload-streaming-mid.png"), full_page=True)
        # The status line draws Stop while the turn runs, the reloaded page's too.
        page.locator(".dt-status .dt-stop-button").wait_for(state="visible")
        # While the model is held the kernel sends nothing: the status line's clock runs on in
        # the browser (kernel/widgets/status_line.js).
        clock = page.locator(".dt-status .dt-clock").inner_text()
        page.wait_for_function(
            "(t) => document.querySelector('.dt-status .dt-clock')?.innerText !== t", arg=clock
        )
        resume.set()
        page.wait_for_function(
            "(t) => document.querySelector('.dt-answer')?.innerText.includes(t)",
            arg="word5 word6",
        )
        page.get_by_text("the end.").first.wait_for()
        wait_for_final_bundle(page, 1, "the end.")
        save_until_on_disk(page, tmp_path / "streaming.ipynb", "the end.")
        assert page.locator(".dt-stop-button:visible").count() == 0  # ended: nothing to stop
    saved = nbformat.read(tmp_path / "streaming.ipynb", as_version=4)
    bundles = [o.get("data", {}) for o in saved.cells[1].outputs]
    final = [b for b in bundles if "the end." in shown_text(b)]
    assert final, [shown_text(b) for b in bundles]
    assert "The tutor is answering" not in shown_text(final[0])
    assert "application/vnd.deeptutor.trace+json" in final[0]


@needs_chromium
def test_stop_on_the_status_line_stops_the_turn(lab: str, fake_llm: FakeLLMServer, tmp_path: Path):
    """Stop is drawn by the status line (kernel/widgets/status_line.js), above the answer."""
    fake_llm.add(Reply(chunks=[f"word{i} " for i in range(300)], chunk_delay=0.1))
    write_notebook(tmp_path / "stop.ipynb", "%load_ext deeptutor_jupyter", "%tutor Go on and on")
    with lab_page("lab-stop") as page:
        open_notebook(page, lab, "stop.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.get_by_text("word3").first.wait_for()
        stop = page.locator(".dt-status .dt-stop-button")
        assert stop.inner_text().strip().endswith("Stop")
        # Named "Stop" for a screen reader (not the square before it), and the keyboard works it.
        assert page.get_by_role("button", name="Stop", exact=True).count() == 1
        page.screenshot(path=str(ARTIFACTS / "lab-stop-running.png"), full_page=True)
        stop.focus()
        page.keyboard.press("Enter")
        # The turn ends as stopped: its static output says so, and no button is left.
        page.get_by_text("Stopped before the answer was finished.").wait_for()
        assert page.locator(".dt-stop-button:visible").count() == 0
        assert "word299" not in page.locator(".jp-Notebook").inner_text()


def long_markdown_answer() -> str:
    """Long enough to stream as several blocks, each with prose, a code fence and $$ math."""
    sections = []
    for i in range(1, 9):
        sections.append(
            f"### Part {i}\n\nThe eigenvalues of $A$ solve the characteristic equation; here is "
            f"example {i} worked out in NumPy, then the same equation written in full. "
            + "Each step keeps the direction of the eigenvector and only scales it. " * 4
            + "\n\n```python\nimport numpy as np\n\n"
            + f"A = np.array([[2, 1], [1, 2]])  # part {i}\nprint(np.linalg.eigvals(A))\n```\n\n"
            + f"$$\n\\det(A - \\lambda I) = (2 - \\lambda)^2 - 1 = 0 \\qquad ({i})\n$$\n\n"
        )
    return "".join(sections) + "That is the whole story."


@needs_chromium
def test_a_long_streamed_answer_renders_fences_and_math_across_blocks(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
):
    answer = long_markdown_answer()
    chunks = [answer[i : i + 12] for i in range(0, len(answer), 12)]
    # The model pauses before its last words until the page has been looked at mid-answer: a
    # 1.5 s stream could end before a loaded machine's page showed it.
    resume = threading.Event()
    fake_llm.add(
        Reply(
            text=answer, chunks=chunks, chunk_delay=0.004, hold_after=len(chunks) - 2, hold=resume
        )
    )
    write_notebook(tmp_path / "long.ipynb", "%load_ext deeptutor_jupyter", "%tutor Explain.")
    with lab_page("lab-long-answer") as page:
        open_notebook(page, lab, "long.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        # While it streams, the answer is Markdown in blocks (labextension/src/answerblocks.ts,
        # which vitest covers), rendered by JupyterLab: formulas typeset, code highlighted.
        held = answer[: sum(map(len, chunks[:-2]))]
        page.wait_for_function(
            """(n) => { const a = document.querySelector('.dt-answer');
                return a && a.querySelectorAll('.dt-text').length > 1
                  && a.querySelectorAll('pre').length === 8
                  && a.querySelectorAll("mjx-container").length >= 15
                  && a.innerText.includes(n); }""",
            arg="Part 8",
            timeout=60000,
        )
        page.screenshot(path=str(ARTIFACTS / "lab-long-answer-mid.png"), full_page=True)
        live = page.locator(".dt-answer").first
        shown = live.inner_text()
        assert "```" not in shown and "$$" not in shown
        assert shown.count("Part ") == held.count("Part ") == 8  # nothing twice, nothing lost
        assert live.locator(".dt-text pre .cm-keyword, .dt-text pre span[class]").count() > 0
        resume.set()
        # Once it has ended, the cell is the static rendering of the whole answer.
        answer = page.locator(".dt-static", has_text="That is the whole story.")
        answer.wait_for(timeout=60000)
        page.wait_for_timeout(1500)  # MathJax typesets after the HTML renders
        code = answer.locator("pre").all_inner_texts()
        assert len(code) == 8 and all("np.linalg.eigvals(A)" in c for c in code)
        assert answer.locator("mjx-container").count() >= 8 + 8  # inline $A$ + $$
        shown = answer.inner_text()
        assert "```" not in shown and "$$" not in shown  # every fence and math block closed
        assert shown.count("Part ") == 8
