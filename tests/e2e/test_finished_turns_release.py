"""A finished turn holds no widget, in a real kernel: live widgets after 50 turns equal those
after 5 (issue 28: 10 widgets a turn stayed alive). The final display no longer shows the live
view (issue 20's static bundle), so nothing needs it once the turn has ended."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.e2e.kernel_driver import KernelDriver

pytestmark = pytest.mark.e2e

# Live widget models, and TurnView objects still reachable (a closed view that the turn's event
# log still held as a subscriber kept its widgets' Python state: RSS grew all the same).
PROBE = (
    "import gc, json; from ipywidgets.widgets import widget as _w\n"
    "from deeptutor_jupyter.kernel.widgets.turn_view import TurnView as _TV\n"
    "gc.collect()\n"
    "print(json.dumps([len(_w._instances), sum(isinstance(o, _TV) for o in gc.get_objects())]))"
)


def live_widgets(kernel: KernelDriver) -> list[int]:
    return list(json.loads(kernel.stream_text(kernel.execute(PROBE)).strip().splitlines()[-1]))


def test_live_widgets_after_50_turns_equal_those_after_5(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([Reply(text=f"Answer {i}, with `code`.\n\nAnd more.") for i in range(200)])

    def turns(count: int) -> None:
        for i in range(count):
            kernel.execute(f"%tutor question {i}")
            kernel.execute("import deeptutor_jupyter; _ = await deeptutor_jupyter.wait_for_turns()")
            kernel.iopub.clear()

    turns(5)
    after_5 = live_widgets(kernel)
    turns(45)
    assert live_widgets(kernel) == after_5
