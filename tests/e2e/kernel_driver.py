"""Drive a real IPython kernel the way JupyterLab does: execute requests and widget comm messages.

The driver mirrors every widget's state from the kernel's comm messages, so a test can look at
what a frontend would render (an Output widget's Markdown, a card's title) and can click buttons
by sending the same ``custom`` message a browser sends.
"""

from __future__ import annotations

import html
import os
import queue
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager

from deeptutor_jupyter.testing import FakeLLMServer
from deeptutor_jupyter.testing.ports import free_port

SECRET = "sk-e2e-SECRET-7f3a9c"


def kernel_env(tmp_path: Path, server: FakeLLMServer, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("DEEPTUTOR_") and not k.endswith("_API_KEY")
    }
    env.update(
        DEEPTUTOR_HOME=str(tmp_path / "home"),
        DEEPTUTOR_PROVIDER="custom",
        DEEPTUTOR_BASE_URL=server.url,
        DEEPTUTOR_MODEL="fake-model",
        DEEPTUTOR_API_KEY=SECRET,
        JPY_SESSION_NAME=str(tmp_path / "lesson.ipynb"),
        IPYTHONDIR=str(tmp_path / "ipython"),
        LANG="C.UTF-8",
        DEEPTUTOR_AUTO_CONSOLIDATE="false",  # a test that wants it passes "true" in extra
    )
    env.update(extra)
    return env


@contextmanager
def loaded_kernel(env: dict[str, str], cwd: Path) -> Iterator[KernelDriver]:
    """A kernel with the extension loaded, shut down at the end (the fixtures' one shape)."""
    driver = KernelDriver(env, cwd=cwd)
    try:
        driver.execute("%load_ext deeptutor_jupyter")
        yield driver
    finally:
        driver.shutdown()


def shown_text(data: dict[str, Any]) -> str:
    """The text an output bundle shows, to look for words in: its Markdown, or (a finished,
    static output carries its text once, as HTML: kernel/display.py ``static_bundle``) its HTML
    without tags, entities decoded; else its plain text."""
    if "text/markdown" in data:
        return str(data["text/markdown"])
    if "text/html" in data:
        return html.unescape(re.sub(r"<[^>]+>", "", str(data["text/html"])))
    return str(data.get("text/plain", ""))


class KernelDriver:
    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        # Ports from the claimed range below the ephemeral one: jupyter_client's own pick (bind
        # to 0, close, the kernel binds a second later) races the servers and kernels of the
        # test process running beside this one.
        self.km = KernelManager(kernel_name="python3", cache_ports=False)
        for name in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"):
            setattr(self.km, name, free_port())
        self.km.start_kernel(env=env, cwd=str(cwd))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        # Every widget's last state, closed ones included: a finished turn closes its view once
        # the static bundle replaces it, and tests still read what it showed last.
        self.widgets: dict[str, dict[str, Any]] = {}
        self.closed: set[str] = set()
        self.gaps = 0  # answer deltas that came past the text this driver holds (_append)
        self.iopub: list[dict[str, Any]] = []
        self.last_reply: dict[str, Any] = {}

    # plumbing ----------------------------------------------------------------------------
    def _take(self, msg: dict[str, Any]) -> None:
        self.iopub.append(msg)
        kind, content = msg["header"]["msg_type"], msg["content"]
        if kind == "comm_open" and content.get("target_name") == "jupyter.widget":
            self.widgets[content["comm_id"]] = dict(content["data"].get("state", {}))
        elif kind == "comm_msg" and content["comm_id"] in self.widgets:
            data = content["data"]
            if data.get("method") in ("update", "echo_update"):
                self.widgets[content["comm_id"]].update(data.get("state", {}))
            elif data.get("method") == "custom" and "at" in (data.get("content") or {}):
                self._append(content["comm_id"], data["content"]["at"], msg["buffers"][0])
        elif kind == "comm_close" and content["comm_id"] in self.widgets:
            self.closed.add(content["comm_id"])

    def _append(self, comm_id: str, at: int, delta: bytes) -> None:
        """The streamed answer's new text (kernel/widgets/answer_stream.js does the same):
        ``at`` counts UTF-16 units; text past a gap is not applied but counted."""
        state = self.widgets[comm_id]
        units = str(state.get("text", "")).encode("utf-16-le")
        if 2 * at > len(units):
            self.gaps += 1
            return
        new = bytes(delta).decode("utf-8").encode("utf-16-le")
        if 2 * at + len(new) > len(units):
            state["text"] = (units[: 2 * at] + new).decode("utf-16-le")

    def pump(self, timeout: float = 0.05) -> None:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                msg = self.kc.get_iopub_msg(timeout=max(left, 0.001))
            except queue.Empty:
                return
            self._take(msg)
            if left <= 0:
                return

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = predicate()
            if result:
                return result
            self.pump(0.05)
        raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")

    def execute(self, code: str, cell_id: str | None = None, timeout: float = 30.0) -> str:
        """Run code like a notebook cell and wait until the kernel is idle again."""
        content = {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        }
        msg = self.kc.session.msg("execute_request", content, metadata={"cellId": cell_id or ""})
        self.kc.shell_channel.send(msg)
        msg_id: str = msg["header"]["msg_id"]
        self.wait_for(lambda: self._idle_after(msg_id), timeout)
        reply = self.shell_reply(msg_id, timeout)
        self.last_reply = reply
        status = reply["content"]["status"]
        if status != "ok":
            raise AssertionError(f"cell failed: {reply['content']}\n{self.stream_text(msg_id)}")
        return msg_id

    def shell_reply(self, msg_id: str, timeout: float = 30.0) -> dict[str, Any]:
        """The shell reply to ``msg_id``, skipping stale ones.

        ``wait_for_ready`` sends ``kernel_info`` every second until the kernel answers, so under
        load a late ``kernel_info_reply`` can arrive after any later request: match by id.
        """
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no shell reply to {msg_id} within {timeout}s")
            reply: dict[str, Any] = self.kc.get_shell_msg(timeout=left)
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply

    def _idle_after(self, msg_id: str) -> bool:
        return any(
            m["header"]["msg_type"] == "status"
            and m["parent_header"].get("msg_id") == msg_id
            and m["content"]["execution_state"] == "idle"
            for m in self.iopub
        )

    def send_comm(self, comm_id: str, data: dict[str, Any]) -> None:
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)

    def click(self, comm_id: str) -> None:
        self.send_comm(comm_id, {"method": "custom", "content": {"event": "click"}})

    def restart(self) -> None:
        """A kernel restart: a new process, and the widget models of the old one are gone."""
        self.km.restart_kernel(now=True)
        self.widgets.clear()
        self.kc.wait_for_ready(timeout=60)

    def shutdown(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    # what a frontend would show ----------------------------------------------------------
    def outputs_of(self, msg_id: str) -> list[dict[str, Any]]:
        return [
            m
            for m in self.iopub
            if m["parent_header"].get("msg_id") == msg_id
            and m["header"]["msg_type"]
            in ("display_data", "update_display_data", "stream", "error")
        ]

    def stream_text(self, msg_id: str) -> str:
        return "".join(
            m["content"].get("text", "")
            for m in self.iopub
            if m["parent_header"].get("msg_id") == msg_id and m["header"]["msg_type"] == "stream"
        )

    def with_class(self, dom_class: str) -> list[str]:
        return [cid for cid, s in self.widgets.items() if dom_class in s.get("_dom_classes", ())]

    def children(self, comm_id: str) -> list[str]:
        return [ref.removeprefix("IPY_MODEL_") for ref in self.widgets[comm_id].get("children", ())]

    def descendants(self, comm_id: str) -> list[str]:
        found: list[str] = []
        for child in self.children(comm_id):
            if child in self.widgets:
                found.append(child)
                found += self.descendants(child)
        return found

    def markdown_in(self, comm_id: str) -> str:
        """All Markdown shown under this widget, in order: the streamed answer's text
        (kernel/widgets/answer_stream.py) and what Output widgets show."""
        texts = []
        for cid in [comm_id, *self.descendants(comm_id)]:
            state = self.widgets.get(cid, {})
            if state.get("_model_name") == "AnyModel" and "text" in state:
                texts.append(str(state["text"]))
            for out in state.get("outputs", ()) or ():
                texts.append(out.get("data", {}).get("text/markdown", ""))
        return "".join(texts)

    def html_in(self, comm_id: str) -> str:
        return "\n".join(
            str(self.widgets[cid].get("value", ""))
            for cid in [comm_id, *self.descendants(comm_id)]
            if self.widgets[cid].get("_model_name") in ("HTMLModel", "HTMLMathModel")
            or "dt-status" in self.widgets[cid].get("_dom_classes", ())  # status_line.py
        )

    def titles_in(self, comm_id: str) -> list[str]:
        titles: list[str] = []
        for cid in [comm_id, *self.descendants(comm_id)]:
            titles += list(self.widgets[cid].get("titles", ()) or ())
        return titles
