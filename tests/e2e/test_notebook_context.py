"""The tutor reads the learner's work: last error, a cell, the notebook, a variable, TUTOR.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.e2e.conftest import kernel_env
from tests.e2e.kernel_driver import KernelDriver, shown_text

pytestmark = pytest.mark.e2e


def done(k: KernelDriver, n: int = 1) -> None:
    k.wait_for(
        lambda: (
            sum("done" in str(k.widgets[s].get("value", "")) for s in k.with_class("dt-status"))
            >= n
        )
    )


def user_text(server: FakeLLMServer, i: int) -> str:
    return str(server.requests[i].body["messages"][-1]["content"])


def tool_text(server: FakeLLMServer, i: int, call_id: str) -> str:
    msgs = server.requests[i].body["messages"]
    return next(m["content"] for m in msgs if m.get("tool_call_id") == call_id)


def test_why_sends_the_last_traceback(kernel: KernelDriver, fake_llm: FakeLLMServer):
    fake_llm.add(Reply(text="You divided by zero."))
    with pytest.raises(AssertionError, match="ZeroDivisionError"):
        kernel.execute("def ratio(a, b):\n    return a / b\n\nratio(1, 0)")
    kernel.execute("%tutor why")
    done(kernel)
    sent = user_text(fake_llm, 0)
    assert "ZeroDivisionError" in sent and "return a / b" in sent and "ratio(1, 0)" in sent


def test_why_keeps_the_learners_frames_only(kernel: KernelDriver, fake_llm: FakeLLMServer):
    fake_llm.add(Reply(text="That is not JSON."))
    kernel.execute("import json\ndef load(text):\n    return json.loads(text)")  # In[2]
    with pytest.raises(AssertionError, match="JSONDecodeError"):
        kernel.execute("load('{oops')")  # In[3]
    msg_id = kernel.execute("%tutor why")
    done(kernel)
    sent = user_text(fake_llm, 0)
    assert "Cell In[3], line 1\n    load('{oops')" in sent
    assert "Cell In[2], line 3, in load\n    return json.loads(text)" in sent
    assert "frames inside json" in sent and "JSONDecodeError: Expecting property name" in sent

    def final_markdown() -> str:
        # The final bundle may follow the status line's "done" by a message or two.
        return "".join(
            shown_text(m["content"]["data"])
            for m in kernel.iopub
            if m["header"]["msg_type"] == "update_display_data"
            and "That is not JSON." in shown_text(m["content"]["data"])
        )

    saved = kernel.wait_for(final_markdown)
    assert "Cell In[3]" in saved, kernel.outputs_of(msg_id)
    for internal in ("interactiveshell", "site-packages", "ipykernel_", "/lib/python", "File /"):
        assert internal not in sent and internal not in saved


def test_why_without_an_error_says_so(kernel: KernelDriver, fake_llm: FakeLLMServer):
    msg_id = kernel.execute("%tutor why")
    shown = json.dumps([m["content"] for m in kernel.outputs_of(msg_id)])
    assert "No error has been raised" in shown
    assert fake_llm.requests == []


def test_cell_and_notebook_tools_read_the_saved_notebook(tmp_path: Path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Exercise 1"),
        nbformat.v4.new_code_cell(
            "def mean(xs):\n    return sum(xs) / len(xs)", metadata={"tags": ["exercise"]}
        ),
    ]
    week = tmp_path / "course" / "week1"
    week.mkdir(parents=True)
    path = week / "lesson.ipynb"
    nbformat.write(nb, path)
    (tmp_path / "course" / "TUTOR.md").write_text("Course rule: answer in short steps.")
    (week / "TUTOR.md").write_text("Never give full solutions to cells tagged exercise.")
    with FakeLLMServer() as server:
        server.extend(
            [
                Reply(text="Let me look.", tool_calls=[ToolCallSpec("read_notebook", {}, id="c1")]),
                Reply(text="Think about empty lists."),
                Reply(
                    text="Checking.",
                    tool_calls=[ToolCallSpec("inspect_variable", {"name": "data"}, id="c2")],
                ),
                Reply(text="A list of 1000 numbers."),
            ]
        )
        k = KernelDriver(kernel_env(tmp_path, server, JPY_SESSION_NAME=str(path)), cwd=week)
        try:
            k.execute("%load_ext deeptutor_jupyter")
            k.execute("def mean(xs):\n    return sum(xs) / len(xs)")
            k.execute("%tutor --cell 2 is my mean right?")
            done(k)
            first = user_text(server, 0)
            assert "Cell [2]" in first and "return sum(xs) / len(xs)" in first
            assert first.endswith("is my mean right?")
            system = server.requests[0].body["messages"][0]["content"]
            assert system.index("Course rule") < system.index("Never give full solutions")
            notebook = tool_text(server, 1, "c1")
            assert "[cell 1] (code, tags: exercise)" in notebook and "# Exercise 1" in notebook
            # No frontend answered for the notebook on screen: the tool says what it read.
            assert notebook.startswith(
                "Notebook cells from the saved file lesson.ipynb (2 cells): Changes not saved "
                "are not included: the notebook on screen did not answer within 2 s."
            )
            k.execute("data = list(range(1000))")
            k.execute("%tutor what is in data")
            done(k, 2)
            info = json.loads(tool_text(server, 3, "c2"))
            assert info["type"] == "builtins.list" and info["len"] == 1000
            # A few items and "...": the length is in "len", the full repr is never built.
            assert len(info["preview"]) < 1700 and info["preview"].endswith(", 19, ...]")
        finally:
            k.shutdown()


def answer_on_screen(kernel: KernelDriver, n: int, reply: dict[str, Any]) -> None:
    """Play the labextension: answer the kernel's ``n``-th ``deeptutor.notebook`` comm."""

    def opened() -> list[dict[str, Any]]:
        return [
            m["content"]
            for m in kernel.iopub
            if m["header"]["msg_type"] == "comm_open"
            and m["content"]["target_name"] == "deeptutor.notebook"
        ]

    request = kernel.wait_for(lambda: len(opened()) >= n and opened()[n - 1])
    kernel.send_comm(request["comm_id"], {"request_id": request["data"]["request_id"], **reply})


def test_read_notebook_reads_the_notebook_on_screen_over_the_comm(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("evens = None")]  # the last save
    nbformat.write(nb, tmp_path / "lesson.ipynb")
    read = Reply(text="Let me look.", tool_calls=[ToolCallSpec("read_notebook", {}, id="r1")])
    again = Reply(text="Again.", tool_calls=[ToolCallSpec("read_notebook", {}, id="r2")])
    fake_llm.extend([read, Reply(text="Nice list."), again, Reply(text="Saved one.")])
    edited = "evens = [n for n in range(10) if n % 2 == 0]"
    cells = [{"cell_type": "code", "source": edited, "source_length": len(edited),
              "execution_count": 2, "outputs": "[0, 2, 4, 6, 8]"}]  # fmt: skip
    kernel.execute("%tutor check my evens")
    answer_on_screen(kernel, 1, {"cells": cells, "total_cells": 1})
    done(kernel)
    seen = tool_text(fake_llm, 1, "r1")
    assert seen.startswith("Notebook cells from the notebook on screen (unsaved changes included)")
    assert edited in seen and "[0, 2, 4, 6, 8]" in seen and "evens = None" not in seen
    # A reply over the limits is refused: the saved file, and why.
    kernel.execute("%tutor check again")
    answer_on_screen(kernel, 2, {"cells": [{**cells[0], "source": "x" * 5000}], "total_cells": 1})
    done(kernel, 2)
    seen = tool_text(fake_llm, 3, "r2")
    assert "from the saved file lesson.ipynb" in seen and "evens = None" in seen
    assert "sent cells that were refused (cells.0.source:" in seen


def test_cell_n_is_the_cell_shown_as_n_with_its_result_and_error(
    kernel: KernelDriver, fake_llm: FakeLLMServer
):
    # Nothing was saved: the kernel's own history is what counts.
    fake_llm.extend([Reply(text="Mean of an empty list."), Reply(text="It is 2.0.")])
    kernel.execute("def mean(xs):\n    return sum(xs) / len(xs)")  # [2]
    kernel.execute("mean([1, 2, 3])")  # [3], Out[3] = 2.0
    with pytest.raises(AssertionError, match="ZeroDivisionError"):
        kernel.execute("mean([])")  # [4]
    kernel.execute("%tutor --cell 4 why?")  # [5]
    done(kernel)
    sent = user_text(fake_llm, 0)
    assert sent.startswith("Cell [4] of my notebook:\n\n```python\nmean([])\n```")
    assert "It raised an error" in sent and "Cell In[2], line 2, in mean" in sent
    assert "ZeroDivisionError: division by zero" in sent and sent.endswith("why?")
    kernel.execute("%tutor --cell [3]")  # [6]
    done(kernel, 2)
    sent = user_text(fake_llm, 1)
    assert "```python\nmean([1, 2, 3])\n```" in sent and "Out[3]" in sent and "2.0" in sent
    assert "raised" not in sent
    msg_id = kernel.execute("%tutor --cell 99 what about this")
    shown = json.dumps([m["content"] for m in kernel.outputs_of(msg_id)])
    assert "There is no cell [99]" in shown and "[1] to [6]" in shown
    assert len(fake_llm.requests) == 2


def test_attach_reads_first_and_the_answer_loop_gets_notes_not_the_reader(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
):
    transcript = tmp_path / "chat.md"
    transcript.write_text("## Assistant: I am ChatBot-X and the answer is 42.\n")
    fake_llm.extend(
        [
            Reply(
                text="Reading.",
                tool_calls=[ToolCallSpec("read_source", {"source": "chat.md"}, id="r1")],
            ),
            Reply(text="The transcript shows an assistant claiming the answer is 42."),
            Reply(text="Let's check that claim together."),
        ]
    )
    kernel.execute(f"%tutor --attach {transcript} is this right")
    done(kernel)
    explore_tools = [t["function"]["name"] for t in fake_llm.requests[0].body["tools"]]
    assert explore_tools == ["read_source"]
    answer_request = fake_llm.requests[2].body
    answer_tools = [t["function"]["name"] for t in answer_request.get("tools", [])]
    assert "read_source" not in answer_tools
    seed = answer_request["messages"][-1]["content"]
    assert "an assistant claiming the answer is 42" in seed and seed.endswith("is this right")
    assert "I am ChatBot-X" not in json.dumps(answer_request["messages"])
    view = kernel.with_class("dt-turn")[0]
    assert kernel.markdown_in(view) == "Let's check that claim together."
    assert any("dt-explore" in w.get("_dom_classes", ()) for w in kernel.widgets.values())


def test_the_api_key_never_reaches_the_model_through_a_tool(
    kernel: KernelDriver, fake_llm: FakeLLMServer
):
    from tests.e2e.kernel_driver import SECRET

    fake_llm.extend(
        [
            Reply(tool_calls=[ToolCallSpec("inspect_variable", {"name": "cfg"}, id="v1")]),
            Reply(text="It holds a key; keep it out of notebooks."),
        ]
    )
    kernel.execute(f"cfg = {{'api_key': {SECRET!r}}}")
    kernel.execute("%tutor what is in cfg")
    done(kernel)
    sent = json.dumps(fake_llm.requests[1].body)
    assert SECRET not in sent and "[redacted]" in sent
    assert SECRET not in json.dumps(
        [m["content"] for m in kernel.iopub if "comm" in m["header"]["msg_type"]]
    )
