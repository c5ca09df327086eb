"""A turn resumed through ``TutorSession`` keeps every event it writes: read back from the store.

Notebook A asks and dies (a process of its own, SIGKILLed while it waits); notebook B answers
through ``TutorSession.submit`` and resumes the saved turn itself. The store then holds the
answer (``user_input_resolved``), the continuation's content and ``done``, each once, their seqs
following those written before the pause. The same when A's pid has since been taken by another
live process (issue 23: a pod's pids start again): A is still gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.runtime.session import TutorSession
from deeptutor_jupyter.store.db import Store
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.runtime.fake_model_env import use_fake_model

ASK_ARGS = {
    "title": "How should we proceed?",
    "mode": "single",
    "options": [{"id": "safe", "label": "Analyse first"}, {"id": "implement", "label": "Do it"}],
}


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        use_fake_model(monkeypatch, tmp_path / "home", s.url)
        yield s


def session(name: str, tmp_path: Path) -> TutorSession:
    return TutorSession(
        name, resolve=lambda f: resolve_settings(flags=f), workspace=lambda: tmp_path
    )


async def until(predicate: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


# Notebook A in a process of its own: it asks, says so, and waits until it is killed.
NOTEBOOK_A = """
import asyncio
import contextlib
import dataclasses
from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.runtime.session import TutorSession

async def main():
    a = TutorSession("lesson_a.ipynb", resolve=lambda f: resolve_settings(flags=f))
    turn = a.ask("Help me with my project", a.resolve({}))
    while not any(e.body.type == "user_input_required" for e in turn.log.events):
        await asyncio.sleep(0.01)
    print(turn.turn_id, max(e.seq for e in turn.log.events), flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def ask_and_die(tmp_path: Path) -> tuple[str, int]:
    """A asks and waits on the question; then SIGKILL: nothing more of it is written."""
    with subprocess.Popen(
        [sys.executable, "-c", NOTEBOOK_A], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None
            line = child.stdout.readline()  # bounded: the child ends (EOF) if it fails
        finally:
            child.kill()
    turn_id, last_seq = line.split()
    return turn_id, int(last_seq)


def reuse_the_pid(home: Path, stack: contextlib.ExitStack) -> None:
    """A's pid now belongs to another live process (a container's pids start again), and the
    row's heartbeat is fresh: only the process's start time tells it is not A."""
    other = stack.enter_context(subprocess.Popen(["sleep", "60"]))
    stack.callback(other.kill)
    store = Store(home / "state.db")
    try:
        [a] = store.owners()
        store.register_owner(dataclasses.replace(a, pid=other.pid, heartbeat=time.time()))
    finally:
        store.close()


@pytest.mark.parametrize("fate", ["killed", "pid reused"])
async def test_a_turn_resumed_by_the_session_that_answers_keeps_its_events_in_the_store(
    server: FakeLLMServer, tmp_path: Path, fate: str
) -> None:
    server.extend(
        [
            Reply(
                text="One question first.",
                tool_calls=[ToolCallSpec("ask_user", ASK_ARGS, id="call_ask_1")],
            ),
            Reply(text="Good: we analyse first."),
        ]
    )
    turn_id, asked_up_to = ask_and_die(tmp_path)
    stack = contextlib.ExitStack()
    if fate == "pid reused":
        reuse_the_pid(tmp_path / "home", stack)

    b = session("lesson_b.ipynb", tmp_path)
    b.open(b.resolve({}))
    store = Store(tmp_path / "home" / "state.db")  # read back as another process would
    try:
        [row] = b.pending(all_sessions=True)
        b.submit(row.session_id, row.request_id, ["safe"])
        await until(lambda: b.turns and b.turns[-1].task and b.turns[-1].task.done(), "resume")
        resumed = b.turns[-1]
        assert resumed.turn_id == turn_id and resumed.answer == "Good: we analyse first."

        events = store.events(turn_id)
        seqs = [seq for seq, _, _ in events]
        assert seqs == sorted(set(seqs)) and seqs[0] == 1, seqs  # strictly increasing, no repeat
        # A's last event is kept and the resumed turn goes on from the next seq.
        assert seqs[seqs.index(asked_up_to) + 1] == asked_up_to + 1
        types = [kind for _, kind, _ in events]
        resolved = [d for _, t, d in events if t == "user_input_resolved"]
        assert [r["id"] for r in resolved] == [row.request_id]
        assert resolved[0]["selections"] == ["safe"]
        text = "".join(d["text"] for _, t, d in events if t == "content")
        assert text.endswith("Good: we analyse first.")
        assert types.count("done") == 1 and types[-1] == "done"
        assert events[-1][2]["status"] == "done"
        # The resumed part comes after what was saved before the pause.
        assert types.index("user_input_resolved") > types.index("user_input_required")
    finally:
        for model in b.models.values():
            await model.aclose()
        store.close()
        b.close()
        stack.close()
