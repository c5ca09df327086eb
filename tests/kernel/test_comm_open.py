"""The comm listens as soon as it opens: the panel sends its first action right after the open,
often on a kernel subshell, while ``start`` still waits for the loop (or for the warming imports).
A comm without a message handler at that moment drops the action silently (a question asked in
the panel then never starts; seen in JupyterLab)."""

from __future__ import annotations

import asyncio
from typing import Any

from deeptutor_jupyter.kernel import comm as comm_module


class FakeComm:
    def __init__(self) -> None:
        self.on_msg_callback: Any = None
        self.on_close_callback: Any = None
        self.sent: list[Any] = []

    def on_msg(self, callback: Any) -> None:
        self.on_msg_callback = callback

    def on_close(self, callback: Any) -> None:
        self.on_close_callback = callback

    def send(self, data: Any) -> None:
        self.sent.append(data)


class FakeManager:
    def __init__(self) -> None:
        self.targets: dict[str, Any] = {}

    def register_target(self, name: str, callback: Any) -> None:
        self.targets[name] = callback


class FakeShell:
    def __init__(self) -> None:
        self.kernel = type("Kernel", (), {"comm_manager": FakeManager()})()


def test_the_handler_is_there_before_start_has_run() -> None:
    shell = FakeShell()
    started: list[bool] = []
    loop = asyncio.new_event_loop()  # the kernel's loop, not running on this thread now
    try:

        async def register() -> None:
            assert comm_module.register(shell, lambda: None)

        loop.run_until_complete(register())
        fake = FakeComm()
        original = comm_module.Channel.start
        comm_module.Channel.start = lambda self: started.append(True)  # type: ignore[method-assign]
        try:
            shell.kernel.comm_manager.targets[comm_module.TARGET](fake, {})
            assert started == []  # posted to the loop, not run yet
            assert fake.on_msg_callback is not None and fake.on_close_callback is not None
            loop.run_until_complete(asyncio.sleep(0))
            assert started == [True]
        finally:
            comm_module.Channel.start = original  # type: ignore[method-assign]
    finally:
        loop.close()
