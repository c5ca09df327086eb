"""In a real kernel: the first turn's imports are warmed after %load_ext, and a question that
arrives while they still are waits for those its request needs, sends it, and only then builds
its view (issue 28: Run All's first turn)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deeptutor_jupyter.kernel.display import VIEW_MIME, WIDGET_MIME
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.e2e.conftest import kernel_env
from tests.e2e.kernel_driver import KernelDriver

pytestmark = pytest.mark.e2e

# What warming exists to take off the first turn: our modules and the heavy packages.
WARMED = ("deeptutor_jupyter", "pydantic", "httpx", "httpcore", "anyio", "ipywidgets", "yaml")

FIRST_TURN = """
import json, sys, deeptutor_jupyter
from deeptutor_jupyter.kernel import warm
_warming = warm.warming()
{before}
def _built():  # our pydantic models built so far (lazy_model.py: built on first use)
    base = getattr(sys.modules.get("pydantic"), "BaseModel", None)
    todo, out = list(base.__subclasses__()) if base else [], set()
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.startswith("deeptutor_jupyter") and cls.__pydantic_complete__:
            out.add(cls.__qualname__)
    return sorted(out)
_before = set(sys.modules)
_built_before = _built()
_at_request = []
def _on_connect(event, args):  # what was imported and built when the turn connected to the model
    if event == "socket.connect" and not _at_request and args[1][1:2] == ({port},):
        _at_request.append(sorted(m for m in {view!r} if m in sys.modules))
        _at_request.append(_built())
sys.addaudithook(_on_connect)
get_ipython().run_line_magic("tutor", "What is a loop?")
_turns = await deeptutor_jupyter.wait_for_turns()
import gc
_collecting = gc.isenabled()  # paused while warming, on again once the request was sent
_added = sorted(m for m in set(sys.modules) - _before if m.startswith({warmed!r}))
_by = getattr(sys.modules.get("warm_probe_slow"), "BY", None)
print(json.dumps({{"warming": _warming, "added": _added, "answer": _turns[-1].answer, "by": _by,
                  "at_request": _at_request[0], "built_before": _built_before,
                  "built_at_request": _at_request[1], "turn_id": _turns[-1].turn_id,
                  "collecting": _collecting}}))
"""
# The view's heavy modules: none of them may be imported before a first turn's request leaves.
VIEW = ("ipywidgets", "deeptutor_jupyter.kernel.widgets.turn_view")
# Models a first turn does not use before its request (its end, a book's chapter, a solve's
# state, a trace, a memory edit; the arguments of the tools it sends, whose schemas come with
# the package, tools/schema_file.py): none may be built before the request leaves.
LATER_MODELS = {
    *("Done", "Chapter", "SolveState", "TraceRecord", "AddOp", "GradedItem"),
    *("MakeQuizArgs", "AskUserArgs", "WriteMemoryArgs"),
}


SLOW_FIRST = """
import sys, deeptutor_jupyter.kernel.warm as w
sys.path.insert(0, {folder!r})
w.MODULES = ("warm_probe_slow", *w.MODULES)
"""
SLOW_MODULE = "import threading, time\ntime.sleep(1.5)\nBY = threading.current_thread().name\n"


def first_turn(
    tmp_path: Path, server: FakeLLMServer, before: str, slow: bool = False
) -> dict[str, object]:
    server.add(Reply(text="A loop repeats."))
    k = KernelDriver(kernel_env(tmp_path, server), cwd=tmp_path)
    try:
        if slow:  # warming starts with a module that takes 1.5 s: the question surely waits
            (tmp_path / "warm_probe_slow.py").write_text(SLOW_MODULE, encoding="utf-8")
            k.execute(SLOW_FIRST.format(folder=str(tmp_path)))
        k.execute("%load_ext deeptutor_jupyter")
        cell = FIRST_TURN.format(before=before, warmed=WARMED, port=server.port, view=VIEW)
        msg_id = k.execute(cell, timeout=60)
        out = k.stream_text(msg_id).strip().splitlines()
        assert out, k.outputs_of(msg_id)
        got = dict(json.loads(out[-1]))
        got["shown"] = shown_under(k, str(got["turn_id"]))
        return got
    finally:
        k.shutdown()


def shown_under(k: KernelDriver, display_id: str) -> list[str]:
    """What the cell showed under the turn's display id, in order: "markdown" (the running
    text alone), "widget" (the live view), "static" (the finished answer)."""
    kinds = []
    for m in k.iopub:
        content = m["content"]
        if (content.get("transient") or {}).get("display_id") != display_id:
            continue
        data = content["data"]
        if WIDGET_MIME in data:
            kinds.append("widget")
        elif data[VIEW_MIME].get("static"):
            kinds.append("static" if "A loop repeats." in data["text/html"] else "static?")
        else:
            kinds.append("markdown")
    return kinds


def test_after_warming_the_first_turn_imports_nothing_heavy(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        got = first_turn(tmp_path, server, before="assert warm.finished()")
    assert got["answer"] == "A loop repeats."
    # A module the first turn needs and kernel/warm.py misses shows up here.
    assert got["added"] == [], got["added"]
    # Warm: the view shows at once, as every later turn's does.
    assert got["at_request"] == sorted(VIEW)
    assert got["shown"] == ["widget", "static"], got["shown"]
    # and builds no model before its request (warm.REQUEST_MODELS and the tools' schemas).
    assert got["built_at_request"] == got["built_before"], got["built_at_request"]


def test_a_question_sent_while_warming_waits_and_is_answered(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        got = first_turn(tmp_path, server, before="", slow=True)
    assert got["warming"] is True  # the thread was still in its slow first module
    assert got["answer"] == "A loop repeats."  # the turn waited for it, then ran: no deadlock
    assert got["by"] == "deeptutor-warm-imports"  # the module was imported by the thread
    # It waited for what its request needs only: the request left before the view's imports
    # (the thread stopped before them), and the view then replaced the running Markdown.
    assert got["at_request"] == [], got["at_request"]
    assert got["shown"] == ["markdown", "widget", "static"], got["shown"]
    # The garbage collector, paused while the thread imported and the question built its
    # request, is on again: its request was sent (not the thread's 2 s bound).
    assert got["collecting"] is True
    # Nor did it wait for models it does not use yet (built on first use: lazy_model.py).
    built = got["built_at_request"]
    assert "TurnStarted" in built and not LATER_MODELS & set(built), built  # type: ignore[operator]


def ask_cold(k: KernelDriver, setup: str = "") -> str:
    """A first turn with warming off (ipywidgets not imported), after ``setup``: its display id."""
    k.execute("import deeptutor_jupyter.kernel.warm as w; w.start(modules=())")
    k.execute("%load_ext deeptutor_jupyter")
    if setup:
        k.execute(setup)
    msg_id = k.execute("%tutor What is a loop?")
    return str(k.outputs_of(msg_id)[0]["content"]["transient"]["display_id"])


def test_a_first_turn_shows_its_view_while_the_model_thinks(tmp_path: Path) -> None:
    # No warming, so ipywidgets is not imported when the question comes: the cell shows the
    # running Markdown, the request leaves, and the view replaces it at once, though the model
    # sends nothing after its headers (built when the request's body was written, not at the
    # first answer).
    with FakeLLMServer() as server:
        server.add(Reply(fault="stall"))
        k = KernelDriver(kernel_env(tmp_path, server), cwd=tmp_path)
        try:
            display_id = ask_cold(k)
            k.wait_for(lambda: shown_under(k, display_id) == ["markdown", "widget"])
            assert len(server.requests) == 1
        finally:
            k.shutdown()


def test_a_view_that_cannot_be_built_says_so_in_the_cell(tmp_path: Path) -> None:
    # Built from the event loop once the request left, a failing view has nobody above it to
    # report it: the cell says what happened instead of "running" for good, and the turn ends.
    with FakeLLMServer() as server:
        server.add(Reply(text="A loop repeats."))
        k = KernelDriver(kernel_env(tmp_path, server), cwd=tmp_path)
        try:
            display_id = ask_cold(
                k,
                "import deeptutor_jupyter.kernel.start as s\n"
                "def _no_view(*args, **kwargs): raise RuntimeError('no widgets here')\n"
                "s.attach_view = _no_view",
            )
            k.wait_for(lambda: shown_under(k, display_id) == ["markdown", "markdown"])
            said = [
                m["content"]["data"]["text/markdown"]
                for m in k.iopub
                if (m["content"].get("transient") or {}).get("display_id") == display_id
            ][-1]
            assert "could not show the tutor's view" in said
            assert "RuntimeError: no widgets here" in said
            k.execute("import deeptutor_jupyter; _t = await deeptutor_jupyter.wait_for_turns()")
            msg = k.execute("print(_t[-1].answer)")
            assert k.stream_text(msg).strip() == "A loop repeats."
        finally:
            k.shutdown()
