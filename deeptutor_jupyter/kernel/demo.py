"""``%tutor demo``: try the tutor with no model, on a scripted stand-in that says it is one.

The stand-in is ``deeptutor_jupyter.testing.FakeLLMServer`` on 127.0.0.1, started inside this
kernel. The kernel's environment then points the tutor at it (``DEEPTUTOR_*``, the settings
layer below ``c.TutorMagics`` and flags) with a scratch ``DEEPTUTOR_HOME``, so the demo's
conversation and memory never mix with the learner's. ``%tutor demo off`` restores both.
Every reply says it is scripted: it answers the quickstart's questions in order, whatever was
asked, and after those only explains how to connect a real model.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec

DEMO_MODEL = "scripted-demo"
NOTE = "_(demo reply: scripted, not a real model)_\n\n"
SCRIPT = [
    Reply(
        text=NOTE + "An **eigenvector** of a matrix $A$ is a direction that $A$ only stretches "
        "or flips, never turns: $A v = \\lambda v$. The stretch factor $\\lambda$ is its "
        "**eigenvalue**."
    ),
    Reply(
        text="Let me check the arithmetic.",
        tool_calls=[ToolCallSpec("calculate", {"expression": "2*3 + 1"}, id="demo_calc")],
    ),
    Reply(text=NOTE + "Yes: $2 \\cdot 3 + 1 = 7$, so if $A v = 7 v$ the eigenvalue is $7$."),
]
USED_UP = Reply(
    text=NOTE + "The demo's scripted replies are used up, so this one cannot answer your "
    "question. Connect a real model to ask your own: run `%tutor demo off`, then `%tutor` shows "
    "a setup card (or see the README)."
)
ANNOUNCE = """\
**Demo mode.** The tutor now talks to a *scripted stand-in* on this machine, **not a real model**:
its replies are canned, in order, and do not read your question. It shows how answers, tool cards
and the Stop button look. Nothing you ask leaves this computer, and the demo keeps its own
scratch conversation and memory.

`%tutor demo off` returns to your own settings; `%tutor` then asks you to connect a model if none
is set up.
"""
OFF = "Demo mode is off: the tutor uses your own settings again."
NOT_ON = "Demo mode is not on."
_ENV = (
    "DEEPTUTOR_HOME",
    "DEEPTUTOR_PROVIDER",
    "DEEPTUTOR_BASE_URL",
    "DEEPTUTOR_MODEL",
    "DEEPTUTOR_AUTO_CONSOLIDATE",
)
_KEY = "DEEPTUTOR_API_KEY"


class DemoServer(FakeLLMServer):
    """The stand-in: the script in order, then the same "connect a real model" reply forever."""

    def _next_reply(self) -> tuple[Reply | None, int]:
        reply, serial = super()._next_reply()
        return (reply or USED_UP), serial


class Demo:
    """One demo per kernel: the running server and the environment it replaced."""

    def __init__(self) -> None:
        self.server: DemoServer | None = None
        self.saved: dict[str, str | None] = {}

    @property
    def on(self) -> bool:
        return self.server is not None

    def start(self) -> str:
        if self.server is None:
            server = self.server = DemoServer(SCRIPT)
            server.start()
            self.saved = {name: os.environ.get(name) for name in (*_ENV, _KEY)}
            os.environ.update(
                DEEPTUTOR_HOME=tempfile.mkdtemp(prefix="deeptutor-demo-"),
                DEEPTUTOR_PROVIDER="custom",
                DEEPTUTOR_BASE_URL=server.url,
                DEEPTUTOR_MODEL=DEMO_MODEL,
                # A real key set for the learner's own model must not be sent to the stand-in.
                DEEPTUTOR_API_KEY="demo",
                # Background consolidation would take the script's replies meant for turns.
                DEEPTUTOR_AUTO_CONSOLIDATE="false",
            )
        return ANNOUNCE

    def stop(self) -> str:
        if self.server is None:
            return NOT_ON
        self.server.stop()
        self.server = None
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        return OFF


_demos: dict[int, Demo] = {}


def demo_for(tutor: Any) -> Demo:
    return _demos.setdefault(id(tutor), Demo())
