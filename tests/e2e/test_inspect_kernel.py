"""inspect_variable in a real kernel: hostile values never freeze the kernel, Stop still works."""

from __future__ import annotations

import json

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.e2e.kernel_driver import KernelDriver

pytestmark = pytest.mark.e2e

SETUP = """
import os, tempfile
from pathlib import Path

class Spin:
    # The preview runs in a forked child: a flag set there never reaches the kernel, a file does.
    mark = Path(tempfile.mkdtemp()) / "started"

    def __repr__(self):
        Spin.mark.write_text("yes")
        while True:
            pass

spin = Spin()
big = [0] * 50_000_000
"""


def status_of(k: KernelDriver, view: str) -> str:
    mine = [s for s in k.with_class("dt-status") if s in k.descendants(view)]
    return str(k.widgets[mine[0]]["value"]) if mine else ""


def latest_view(k: KernelDriver, before: list[str]) -> str:
    return str(k.wait_for(lambda: [v for v in k.with_class("dt-turn") if v not in before])[0])


def printed(k: KernelDriver, code: str) -> str:
    return k.stream_text(k.execute(code)).strip()


def test_a_fifty_million_item_list_gets_a_bounded_preview(
    kernel: KernelDriver, fake_llm: FakeLLMServer
):
    kernel.execute(SETUP)
    fake_llm.extend(
        [
            Reply(tool_calls=[ToolCallSpec("inspect_variable", {"name": "big"}, id="c1")]),
            Reply(text="A long list of zeros."),
        ]
    )
    kernel.execute("%tutor what is in big?")
    view = latest_view(kernel, [])
    kernel.wait_for(lambda: "done" in status_of(kernel, view), timeout=60)
    tool = next(m for m in fake_llm.requests[1].body["messages"] if m["role"] == "tool")
    info = json.loads(tool["content"])
    assert info["len"] == 50_000_000 and info["type"] == "builtins.list"
    assert len(info["preview"]) < 200 and info["preview"].endswith("...]")


def test_a_spinning_repr_leaves_the_kernel_responsive_and_stop_ends_the_turn(
    kernel: KernelDriver, fake_llm: FakeLLMServer
):
    kernel.execute(SETUP)
    # A limit far above the test's own timeouts: only Stop can end this inspection.
    kernel.execute("import deeptutor_jupyter.kernel.notebook_context as n; n.INSPECT_SECONDS = 600")
    fake_llm.add(Reply(tool_calls=[ToolCallSpec("inspect_variable", {"name": "spin"}, id="c1")]))
    kernel.execute("%tutor what is spin?")
    view = latest_view(kernel, [])
    # Trivial cells run while the __repr__ spins (before the fix the kernel froze here).
    kernel.wait_for(lambda: printed(kernel, "print(Spin.mark.exists())") == "True", timeout=60)
    assert printed(kernel, "print(1 + 1)") == "2"
    assert "stopped" not in status_of(kernel, view) and "done" not in status_of(kernel, view)
    stop = next(b for b in kernel.with_class("dt-stop") if b in kernel.descendants(view))
    kernel.click(stop)
    kernel.wait_for(lambda: "stopped" in status_of(kernel, view))
    assert len(fake_llm.requests) == 1  # the turn ended; nothing more was asked of the model
    # The learner's variables survive, and the spinning child is gone (killed and reaped).
    assert printed(kernel, "print(type(spin).__name__, len(big))") == "Spin 50000000"
    tasks = "Path('/proc/self/task').iterdir()"
    check = f"print(sum(len((t / 'children').read_text().split()) for t in {tasks}))"
    assert printed(kernel, check) == "0"
