"""Memory and knowledge in a kernel: the trace bundle, the L1 file, a --kb turn with citations."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from deeptutor_jupyter.kernel.display import WIDGET_MIME
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.e2e.conftest import kernel_env
from tests.e2e.kernel_driver import KernelDriver, shown_text

pytestmark = pytest.mark.e2e
TRACE_MIME = "application/vnd.deeptutor.trace+json"


def done(k: KernelDriver, n: int = 1) -> None:
    k.wait_for(
        lambda: (
            sum("done" in str(k.widgets[s].get("value", "")) for s in k.with_class("dt-status"))
            >= n
        )
    )


def final_bundle(k: KernelDriver) -> dict:
    # The first update without a widget: a kernel's first turn may first update its running
    # Markdown to its live view (its request was sent before the view was built).
    return k.wait_for(
        lambda: next(
            (
                m["content"]["data"]
                for m in k.iopub
                if m["header"]["msg_type"] == "update_display_data"
                and WIDGET_MIME not in m["content"]["data"]
            ),
            None,
        )
    )


def test_each_turn_leaves_its_trace_in_the_cell_and_in_the_store(kernel, fake_llm, tmp_path):
    fake_llm.add(Reply(text="A derivative is a rate of change."))
    kernel.execute("%tutor What is a derivative?")
    done(kernel)
    bundle = final_bundle(kernel)
    trace = bundle[TRACE_MIME]
    assert trace["question"] == "What is a derivative?"
    assert trace["answer_summary"].startswith("A derivative is a rate of change.")
    assert trace["model"].endswith("/fake-model") and trace["turn_id"].startswith("turn-")
    assert "A derivative is a rate of change." in shown_text(bundle)
    files = list((tmp_path / "home" / "memory" / "trace").rglob("*.jsonl"))
    assert len(files) == 1 and files[0].parent.name == "notebook"
    lines = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert [line["trace_id"] for line in lines] == [trace["trace_id"]]


def test_traces_can_be_kept_out_of_outputs(tmp_path):
    with FakeLLMServer([Reply(text="ok")]) as server:
        env = kernel_env(tmp_path, server, DEEPTUTOR_TRACE_IN_OUTPUTS="false")
        k = KernelDriver(env, cwd=tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter\n%tutor hi")
            done(k)
            bundle = final_bundle(k)
            assert TRACE_MIME not in bundle and "ok" in shown_text(bundle)
            assert list((tmp_path / "home" / "memory" / "trace").rglob("*.jsonl"))
        finally:
            k.shutdown()


def test_a_kb_turn_searches_and_cites_the_right_cell(kernel, fake_llm, tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Week 1\nIntroduction to the course."),
        nbformat.v4.new_markdown_cell("## Eigenvalues\nAn eigenvalue scales its eigenvector."),
    ]
    nbformat.write(nb, course / "week1.ipynb")
    kernel.execute(f"%tutor kb add linalg {course}")
    kernel.wait_for(
        lambda: any(
            "linalg" in str(w.get("value", "")) and "chunk" in str(w.get("value", ""))
            for w in kernel.widgets.values()
        )
    )
    # kb add ends by updating its own text fallback; the turn's final bundle comes after it.
    kernel.wait_for(
        lambda: any(m["header"]["msg_type"] == "update_display_data" for m in kernel.iopub)
    )
    kernel.iopub.clear()
    fake_llm.extend(
        [
            Reply(
                text="Searching.",
                tool_calls=[ToolCallSpec("search_knowledge", {"query": "eigenvalue"}, id="s1")],
            ),
            Reply(text="An eigenvalue scales its eigenvector [1]."),
        ]
    )
    kernel.execute("%tutor --kb linalg what does an eigenvalue do")
    done(kernel)
    first = fake_llm.requests[0].body
    assert "search_knowledge" in [t["function"]["name"] for t in first["tools"]]
    result = next(m for m in fake_llm.requests[1].body["messages"] if m.get("tool_call_id") == "s1")
    assert "An eigenvalue scales its eigenvector." in result["content"]
    bundle = final_bundle(kernel)
    page = bundle["text/html"]
    assert "<strong>Sources</strong>" in page and "week1.ipynb, cell 2" in page
    assert 'href="course/week1.ipynb' in page  # relative to the notebook, so JupyterLab opens it
    sources = [w for w in kernel.widgets.values() if "dt-sources" in w.get("_dom_classes", ())]
    assert sources and "week1.ipynb" in json.dumps(sources[0]["outputs"])


def test_an_unknown_kb_is_refused_before_any_request(kernel, fake_llm):
    msg_id = kernel.execute("%tutor --kb nope hello")
    shown = json.dumps([m["content"] for m in kernel.outputs_of(msg_id)])
    assert "No knowledge base named nope" in shown
    assert fake_llm.requests == []


def test_memory_tools_and_skills_are_offered(kernel, fake_llm):
    fake_llm.add(Reply(text="ok"))
    kernel.execute("%tutor hi")
    done(kernel)
    body = fake_llm.requests[0].body
    names = [t["function"]["name"] for t in body["tools"]]
    assert {"ask_user", "read_memory", "write_memory", "read_notebook", "read_skill"} <= set(names)
    assert "search_knowledge" not in names
    system = body["messages"][0]["content"]
    assert "socratic-hints" in system and "worked-example" in system


def test_memory_import_rebuilds_traces_from_a_saved_notebook(kernel, fake_llm, tmp_path: Path):
    record = {
        "trace_id": "t_imported_1",
        "session_id": "s",
        "turn_id": "turn-x",
        "model": "m",
        "started_at": 1.0,
        "finished_at": 2.0,
        "question": "q",
        "answer_summary": "a",
    }
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("%tutor q")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={TRACE_MIME: record, "text/plain": "q"})
    ]
    nb.cells = [cell]
    nbformat.write(nb, tmp_path / "old.ipynb")
    for _ in range(2):
        msg_id = kernel.execute(f"%tutor memory import {tmp_path / 'old.ipynb'}")
    shown = json.dumps([m["content"] for m in kernel.outputs_of(msg_id)])
    assert "Imported **0 traces**" in shown and "1 already known" in shown


def test_memory_commands_open_the_workbench_and_the_forget_form(kernel, fake_llm, tmp_path):
    fake_llm.add(Reply(text="Noted."))
    kernel.execute("%tutor hi")
    done(kernel)
    kernel.execute("%tutor memory")
    kernel.wait_for(lambda: kernel.with_class("dt-memory"))
    kernel.execute("%tutor memory forget --all")
    kernel.wait_for(lambda: kernel.with_class("dt-forget"))
    msg_id = kernel.execute(f"%tutor memory export {tmp_path / 'mem.zip'}")
    assert "mem.zip" in json.dumps([m["content"] for m in kernel.outputs_of(msg_id)])
    assert (tmp_path / "mem.zip").stat().st_size > 0
    msg_id = kernel.execute("%tutor memory consolidate --mode merge")
    kernel.wait_for(
        lambda: any(
            "merge" in str(w.get("value", "")) and "changes applied" in str(w.get("value", ""))
            for w in kernel.widgets.values()
        )
    )


def test_a_bad_kb_or_memory_line_says_what_is_wrong_and_shows_the_usage(kernel, fake_llm):
    cases = {
        "%tutor kb add course": "the following arguments are required: paths",
        "%tutor kb lsit": "invalid choice: 'lsit'",
        "%tutor memory consolidate --mode fast": "argument --mode: invalid choice: 'fast'",
        "%tutor memory forget": "the following arguments are required: --all",
    }
    for line, problem in cases.items():
        msg_id = kernel.execute(line)
        shown = json.dumps([m["content"] for m in kernel.outputs_of(msg_id)])
        assert problem in shown, (line, shown)
        assert "%tutor kb add" in shown or "%tutor memory consolidate" in shown
    assert not fake_llm.requests  # nothing reached the model, nothing was indexed or forgotten
