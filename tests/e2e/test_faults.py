"""Fault injection against a real kernel: every fault ends in a card that says what happened.

One kernel serves the whole module (the faults run one after another, as a learner would meet
them), against ``FakeLLMServer`` scripted with ``deeptutor_jupyter.testing.faults``. The first
turn saves an answer; the last checks that it, and the conversation, survived every fault.
"""

from __future__ import annotations

import html
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, faults
from tests.e2e.kernel_driver import KernelDriver, kernel_env, loaded_kernel

pytestmark = pytest.mark.e2e

FIRST_ANSWER = "Remember this: the answer is **42**."


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def k(home: Path, server: FakeLLMServer) -> Iterator[KernelDriver]:
    env = kernel_env(
        home,
        server,
        DEEPTUTOR_TIMEOUT="1.5",  # a stalled server meets the read timeout first
        DEEPTUTOR_IDLE_TIMEOUT="2.5",  # keep-alives defeat the read timeout, not this one
        DEEPTUTOR_MAX_RETRY_WAIT="30",
        DEEPTUTOR_LANGUAGE="en",
    )
    with loaded_kernel(env, home) as driver:
        yield driver


def ask(k: KernelDriver, line: str) -> str:
    """Run a %tutor cell and return its new turn view."""
    before = set(k.with_class("dt-turn"))
    k.execute(line)
    return str(k.wait_for(lambda: [v for v in k.with_class("dt-turn") if v not in before])[0])


def status_of(k: KernelDriver, view: str) -> str:
    mine = [s for s in k.with_class("dt-status") if s in k.descendants(view)]
    return html.unescape(str(k.widgets[mine[0]]["value"])) if mine else ""


def error_text(k: KernelDriver, view: str) -> str:
    found = [c for c in k.with_class("dt-error") if c in k.descendants(view)]
    return html.unescape("\n".join(str(k.widgets[c]["value"]) for c in found))


def failed_with(k: KernelDriver, view: str, timeout: float = 30.0) -> str:
    k.wait_for(lambda: "failed" in status_of(k, view), timeout)
    return error_text(k, view)


def turns(home: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(home / "home" / "state.db") as db:
        # A turn's answer is kept once: in the row, or in the history message it points at.
        rows = db.execute(
            "SELECT t.question, t.status, COALESCE(t.answer, json_extract(m.message, '$.content'))"
            " FROM turns t LEFT JOIN messages m"
            " ON m.session_id = t.session_id AND m.idx = t.answer_at ORDER BY t.created_at"
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]


def test_0_a_first_answer_is_saved(k: KernelDriver, server: FakeLLMServer, home: Path):
    server.add(Reply(text=FIRST_ANSWER))
    view = ask(k, "%tutor What is the answer?")
    k.wait_for(lambda: "done" in status_of(k, view))
    assert turns(home)[-1] == ("What is the answer?", "done", FIRST_ANSWER)


def test_refused_connection(k: KernelDriver):
    view = ask(k, f"%tutor --base-url {faults.refused_url()} hello")
    assert "No server is answering at http://127.0.0.1:" in failed_with(k, view)


def test_reset_mid_stream_keeps_what_was_shown(k: KernelDriver, server: FakeLLMServer):
    server.add(faults.reset_mid_stream("The answer starts well and then", after=2))
    view = ask(k, "%tutor reset please")
    words = failed_with(k, view)
    assert "The connection to" in words and "dropped while the answer was streaming" in words
    shown = k.markdown_in(view)
    assert shown.startswith("The answer") and "well" not in shown  # what was shown stays


def test_stalled_server_meets_the_read_timeout(k: KernelDriver, server: FakeLLMServer):
    server.add(faults.stalled())
    view = ask(k, "%tutor stall please")
    words = failed_with(k, view)
    assert "did not answer in time" in words and "DEEPTUTOR_TIMEOUT" in words


def test_keep_alive_only_meets_the_idle_timeout(k: KernelDriver, server: FakeLLMServer):
    server.add(faults.keep_alive_only(interval=0.2))
    view = ask(k, "%tutor keep alive please")
    words = failed_with(k, view)
    assert "sent nothing for 2.5 s" in words and "idle_timeout" in words


def test_empty_chunks_only_meet_the_idle_timeout(k: KernelDriver, server: FakeLLMServer):
    server.add(faults.empty_chunks_only(interval=0.2))
    view = ask(k, "%tutor empty chunks please")
    words = failed_with(k, view)
    assert "sent nothing for 2.5 s" in words and "idle_timeout" in words


def test_malformed_json(k: KernelDriver, server: FakeLLMServer):
    server.add(faults.malformed_json())
    view = ask(k, "%tutor malformed please")
    assert "an event is not JSON" in failed_with(k, view)


def test_a_long_retry_after_ends_in_the_429_card_at_once(k: KernelDriver, server: FakeLLMServer):
    server.add(faults.rate_limited(retry_after=600))
    view = ask(k, "%tutor rate limit please")
    words = failed_with(k, view)
    assert "HTTP 429" in words and "asked to wait 600 s" in words
    assert "max_retry_wait (30 s)" in words and "10 min" in words
    assert server.pending == 0  # asked once, not retried


def test_a_short_retry_after_is_counted_down_then_answered(k: KernelDriver, server: FakeLLMServer):
    server.extend([faults.rate_limited(retry_after=3), Reply(text="After the wait.")])
    view = ask(k, "%tutor rate limit briefly")
    k.wait_for(lambda: "retrying in" in status_of(k, view))
    assert "rate limited by OpenAI-compatible server, retrying in" in status_of(k, view)
    k.wait_for(lambda: "done" in status_of(k, view))
    assert k.markdown_in(view) == "After the wait."


def test_a_five_megabyte_answer_arrives_whole(k: KernelDriver, server: FakeLLMServer, home: Path):
    reply = faults.huge_answer(megabytes=5)
    server.add(reply)
    # The module's 1.5 s read timeout is for the stall tests; 5 MB between two processes on a
    # loaded 2-core machine can leave the socket quiet longer than that (CI: "did not answer in
    # time"), so this turn gets a timeout that only a real stall would meet.
    view = ask(k, "%tutor --timeout 60 a very long answer")
    k.wait_for(lambda: "done" in status_of(k, view), timeout=120)
    question, status, answer = turns(home)[-1]
    assert (question, status) == ("a very long answer", "done")
    assert answer == reply.text and len(answer) == 5 * 1024 * 1024


def test_a_home_that_cannot_be_written_is_a_card_not_a_traceback(k: KernelDriver, home: Path):
    blocker = home / "not-a-folder"
    blocker.write_text("a file where the home should be")
    msg_id = k.execute(
        f"import os; _old = os.environ['DEEPTUTOR_HOME']\n"
        f"os.environ['DEEPTUTOR_HOME'] = {str(blocker / 'home')!r}\n"
        "%tutor hello\n"
        "os.environ['DEEPTUTOR_HOME'] = _old"
    )
    shown = json.dumps([m["content"] for m in k.outputs_of(msg_id)])
    assert "Not started." in shown and "not-a-folder" in shown
    assert "Traceback" not in shown and "StoreError" not in shown


def test_a_full_disk_is_a_card_not_a_traceback(k: KernelDriver, home: Path):
    # ENOSPC cannot be produced on demand here (no small filesystem to fill), so the kernel's
    # os.open is made to fail the way a full disk fails, for one cell only.
    msg_id = k.execute(
        "import errno, os\n"
        "from deeptutor_jupyter import _files\n"
        "class _Full:\n"
        "    def __getattr__(self, name):\n"
        "        return getattr(os, name)\n"
        "    def open(self, *a, **kw):\n"
        "        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
        "_old = os.environ['DEEPTUTOR_HOME']\n"
        f"os.environ['DEEPTUTOR_HOME'] = {str(home / 'full-disk-home')!r}\n"
        "_files.os = _Full()\n"
        "try:\n"
        "    get_ipython().run_line_magic('tutor', 'hello')\n"
        "finally:\n"
        "    _files.os = os\n"
        "    os.environ['DEEPTUTOR_HOME'] = _old"
    )
    shown = json.dumps([m["content"] for m in k.outputs_of(msg_id)])
    assert (
        "The disk holding" in shown and "is full; free some space and run the cell again" in shown
    )
    assert "Traceback" not in shown


def test_z_nothing_saved_was_lost(k: KernelDriver, server: FakeLLMServer, home: Path):
    server.add(Reply(text="Still here."))
    server.clear_requests()
    view = ask(k, "%tutor Do you remember?")
    k.wait_for(lambda: "done" in status_of(k, view))
    sent = server.requests[0].body["messages"]
    assert {"role": "assistant", "content": FIRST_ANSWER} in sent  # the conversation survived
    saved = turns(home)
    assert saved[0] == ("What is the answer?", "done", FIRST_ANSWER)
    statuses = [s for _, s, _ in saved]
    assert statuses.count("error") == 7 and statuses[-1] == "done"
