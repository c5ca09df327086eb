"""In a real kernel: the first turn's imports are warmed after %load_ext, and a question that
arrives while they still are waits for them and is answered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
_before = set(sys.modules)
get_ipython().run_line_magic("tutor", "What is a loop?")
_turns = await deeptutor_jupyter.wait_for_turns()
_added = sorted(m for m in set(sys.modules) - _before if m.startswith({warmed!r}))
_by = getattr(sys.modules.get("warm_probe_slow"), "BY", None)
print(json.dumps({{"warming": _warming, "added": _added, "answer": _turns[-1].answer, "by": _by}}))
"""


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
        msg_id = k.execute(FIRST_TURN.format(before=before, warmed=WARMED), timeout=60)
        out = k.stream_text(msg_id).strip().splitlines()
        assert out, k.outputs_of(msg_id)
        return dict(json.loads(out[-1]))
    finally:
        k.shutdown()


def test_after_warming_the_first_turn_imports_nothing_heavy(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        got = first_turn(tmp_path, server, before="assert warm.wait()")
    assert got["answer"] == "A loop repeats."
    # A module the first turn needs and kernel/warm.py misses shows up here.
    assert got["added"] == [], got["added"]


def test_a_question_sent_while_warming_waits_and_is_answered(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        got = first_turn(tmp_path, server, before="", slow=True)
    assert got["warming"] is True  # the thread was still in its slow first module
    assert got["answer"] == "A loop repeats."  # the turn waited for it, then ran: no deadlock
    assert got["by"] == "deeptutor-warm-imports"  # the module was imported by the thread
