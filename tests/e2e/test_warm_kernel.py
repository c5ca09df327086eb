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
print(json.dumps({{"warming": _warming, "added": _added, "answer": _turns[-1].answer}}))
"""


def first_turn(tmp_path: Path, server: FakeLLMServer, before: str) -> dict[str, object]:
    server.add(Reply(text="A loop repeats."))
    k = KernelDriver(kernel_env(tmp_path, server), cwd=tmp_path)
    try:
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
    assert got["added"] == []


def test_a_question_sent_while_warming_waits_and_is_answered(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        got = first_turn(tmp_path, server, before="")
    assert got["warming"] is True  # sent the moment %load_ext returned: the thread still ran
    assert got["answer"] == "A loop repeats."
