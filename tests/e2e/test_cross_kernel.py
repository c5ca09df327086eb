"""ask_user across kernels: a question asked in notebook A is answered in notebook B.

Two real kernels share one learner home. The owner of a question (the kernel whose turn waits on
it) continues the turn in its own cell when the answer comes from elsewhere; only when the owner
is gone does the answering kernel resume the saved turn itself. SIGKILL at each step of such a
resume leaves a question that can still be answered or a turn that finished.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.e2e.kernel_driver import KernelDriver, kernel_env, shown_text
from tests.e2e.test_ask_user_kernel import (
    answer_text,
    ask,
    button,
    inside,
    receipt_text,
    tool_messages,
    update,
)

pytestmark = pytest.mark.e2e


def start(tmp_path: Path, server: FakeLLMServer, name: str) -> KernelDriver:
    env = kernel_env(tmp_path, server, JPY_SESSION_NAME=str(tmp_path / f"{name}.ipynb"))
    k = KernelDriver(env, cwd=tmp_path)
    k.execute("%load_ext deeptutor_jupyter")
    return k


@pytest.fixture
def kernels() -> Iterator[list[KernelDriver]]:
    """Kernels a test leaves running; shut down however the test ends."""
    started: list[KernelDriver] = []
    yield started
    for k in started:
        with contextlib.suppress(Exception):
            k.shutdown()


def db(tmp_path: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(tmp_path / "home" / "state.db")
    try:
        return list(conn.execute(sql, params))
    finally:
        conn.close()


def open_card(k: KernelDriver) -> str:
    cards = k.wait_for(lambda: k.with_class("dt-ask-user"))
    return str(cards[-1])


def answer_first_option(k: KernelDriver, card: str) -> None:
    radio = inside(k, card, "RadioButtonsModel")[0]
    update(k, radio, index=0)
    k.click(button(k, card, "dt-ask-submit"))


def last_static_update(k: KernelDriver) -> dict[str, Any]:
    """The newest display update of ``k`` that needs no widget model (what its file keeps)."""
    return k.wait_for(
        lambda: [
            m["content"]["data"]
            for m in k.iopub
            if m["header"]["msg_type"] == "update_display_data"
            and "application/vnd.jupyter.widget-view+json" not in m["content"]["data"]
        ]
    )[-1]


def kill(k: KernelDriver) -> None:
    """SIGKILL, as the OOM killer or a crash would: nothing of the kernel runs afterwards."""
    pid = k.km.provisioner.process.pid  # type: ignore[union-attr]
    os.kill(pid, signal.SIGKILL)
    k.km.provisioner.process.wait()  # type: ignore[union-attr]
    k.shutdown()  # the manager's own clean-up (channels, sockets) of a process already dead


def pending_in(k: KernelDriver) -> str:
    k.execute("%tutor pending --all")
    return open_card(k)


def test_an_answer_from_notebook_b_continues_the_turn_in_notebook_a(
    tmp_path: Path, fake_llm: FakeLLMServer, kernels: list[KernelDriver]
) -> None:
    fake_llm.extend([ask(), Reply(text="Good: we analyse first.")])
    a = start(tmp_path, fake_llm, "lesson_a")
    kernels.append(a)
    a.execute("x = 1")
    a.execute("%tutor Help me with my project")  # In [3]: %load_ext was [1]
    card_a = open_card(a)

    b = start(tmp_path, fake_llm, "lesson_b")
    kernels.append(b)
    card_b = pending_in(b)
    answer_first_option(b, card_b)

    # A's own cell continues, and A's card follows the answer given in B.
    a.wait_for(lambda: "Good: we analyse first." in answer_text(a), timeout=20)
    a.wait_for(lambda: "Analyse first" in receipt_text(a, card_a))
    # B says where the turn went on, and runs nothing of it.
    b.wait_for(lambda: "lesson_a.ipynb, cell [3]" in receipt_text(b, card_b))
    assert "Good: we analyse first." not in answer_text(b)
    # B's saved file keeps the question answered, by label, not the open form (issue 20).
    settled = last_static_update(b)
    text = shown_text(settled)
    assert "Analyse first" in text and "went on in lesson_a.ipynb, cell [3]" in text
    sent = tool_messages(fake_llm, "call_ask_1")
    assert len(sent) == 1
    assert json.loads(sent[0]["content"])["selections"] == ["safe"]
    a.wait_for(lambda: db(tmp_path, "SELECT status FROM turns") == [("done",)])
    # The live question's saved state went with the turn's end.
    assert db(tmp_path, "SELECT COUNT(*) FROM turn_states") == [(0,)]
    # B's receipt stops saying the turn goes on once it has finished in A.
    b.wait_for(lambda: "went on in lesson_a.ipynb, cell [3]" in receipt_text(b, card_b))
    assert "continues in" not in receipt_text(b, card_b)


def test_a_card_shown_elsewhere_follows_an_answer_given_in_the_owner(
    tmp_path: Path, fake_llm: FakeLLMServer, kernels: list[KernelDriver]
) -> None:
    fake_llm.extend([ask(), Reply(text="Answered in A itself.")])
    a = start(tmp_path, fake_llm, "lesson_a")
    kernels.append(a)
    a.execute("%tutor Help me with my project")
    card_a = open_card(a)
    b = start(tmp_path, fake_llm, "lesson_b")
    kernels.append(b)
    card_b = pending_in(b)
    answer_first_option(a, card_a)
    a.wait_for(lambda: "Answered in A itself." in answer_text(a))
    # The card in B is no longer an open form: it shows the answer given in A.
    b.wait_for(lambda: "Analyse first" in receipt_text(b, card_b))
    assert not [c for c in b.with_class("dt-ask-submit") if c in b.descendants(card_b)]


def test_a_question_whose_kernel_died_is_resumed_by_the_kernel_that_answers(
    tmp_path: Path, fake_llm: FakeLLMServer, kernels: list[KernelDriver]
) -> None:
    fake_llm.extend([ask(), Reply(text="Resumed in B.")])
    a = start(tmp_path, fake_llm, "lesson_a")
    a.execute("%tutor Help me with my project")
    open_card(a)
    kill(a)

    b = start(tmp_path, fake_llm, "lesson_b")
    kernels.append(b)
    card_b = pending_in(b)
    answer_first_option(b, card_b)
    b.wait_for(lambda: "Resumed in B." in answer_text(b), timeout=20)
    assert len(tool_messages(fake_llm, "call_ask_1")) == 1
    b.wait_for(lambda: db(tmp_path, "SELECT status FROM turns") == [("done",)])
    seqs = [r[0] for r in db(tmp_path, "SELECT seq FROM events ORDER BY rowid")]
    assert seqs == sorted(set(seqs)) and seqs[0] == 1  # strictly increasing, nothing overwritten
    # What B wrote after the pause is in the store too: the answer, the new text and the end.
    stored = db(tmp_path, "SELECT type, data FROM events ORDER BY seq")
    types = [t for t, _ in stored]
    assert types.count("user_input_resolved") == 1 and types.count("done") == 1
    assert types.index("user_input_required") < types.index("user_input_resolved")
    assert types[-1] == "done" and json.loads(stored[-1][1])["status"] == "done"
    text = "".join(json.loads(d)["text"] for t, d in stored if t == "content")
    assert text.endswith("Resumed in B.")


@pytest.mark.parametrize("step", ["after_submit", "after_first_token", "after_done"])
def test_sigkill_during_a_resume_loses_no_answer(
    tmp_path: Path, fake_llm: FakeLLMServer, kernels: list[KernelDriver], step: str
) -> None:
    # The answer pauses where the step kills the kernel (never released: the server's stop
    # ends it), so a loaded machine cannot finish it first; "after_done" runs it through.
    never = threading.Event()
    words = ["First ", "token ", "then ", "the ", "rest."]
    pause = {"after_submit": 0, "after_first_token": 1}.get(step)
    slow = Reply(chunks=words, chunk_delay=0.1, hold_after=pause, hold=never)
    fake_llm.extend([ask(), slow])
    a = start(tmp_path, fake_llm, "lesson_a")
    a.execute("%tutor Help me with my project")
    open_card(a)
    kill(a)

    b = start(tmp_path, fake_llm, "lesson_b")
    card_b = pending_in(b)
    answer_first_option(b, card_b)
    if step == "after_submit":
        b.wait_for(lambda: len(fake_llm.requests) == 2)
    elif step == "after_first_token":
        b.wait_for(lambda: "First" in answer_text(b))
    else:
        b.wait_for(lambda: db(tmp_path, "SELECT status FROM turns") == [("done",)], timeout=20)
    kill(b)

    assert db(tmp_path, "PRAGMA integrity_check") == [("ok",)]
    turn = db(tmp_path, "SELECT status FROM turns")[0][0]
    if step == "after_done":
        assert turn == "done"
        return
    # A third kernel finds the question answerable again, with the answer given kept.
    fake_llm.extend([Reply(text="Finished at last.")])
    c = start(tmp_path, fake_llm, "lesson_c")
    kernels.append(c)
    card_c = pending_in(c)
    assert db(tmp_path, "SELECT status FROM pending") == [("pending",)]
    kept = db(tmp_path, "SELECT result FROM pending")[0][0]
    assert json.loads(kept)["selections"] == ["safe"]
    answer_first_option(c, card_c)
    c.wait_for(lambda: "Finished at last." in answer_text(c), timeout=20)
    c.wait_for(lambda: db(tmp_path, "SELECT status FROM turns") == [("done",)])
    seqs = [r[0] for r in db(tmp_path, "SELECT seq FROM events ORDER BY rowid")]
    assert seqs == sorted(set(seqs))
