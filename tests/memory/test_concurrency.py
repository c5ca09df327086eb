"""Several processes on one DEEPTUTOR_HOME: nothing lost, nothing torn."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from deeptutor_jupyter.memory import MemoryStore, parse
from deeptutor_jupyter.memory._files import SLOW_WRITE_ENV

REPO = Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from deeptutor_jupyter.memory import MemoryStore, TraceRecord
    home, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    store = MemoryStore(home)
    for i in range(count):
        now = time.time()
        store.emit(TraceRecord(trace_id=f"{name}_{i}", session_id=name, turn_id=str(i),
            model="m", started_at=now, finished_at=now, question="q", answer_summary="a"))
        store.write_preference("add", f"{name} preference {i}", trace_id=f"{name}_{i}")
        store.apply_ops("L2", "chat", [{"op": "add", "section": name,
            "text": f"{name} fact {i}", "refs": [f"{name}_{i}"]}])
    """
)


def _spawn(home: Path, name: str, count: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(home), name, str(count)],
        cwd=REPO,
        stderr=subprocess.PIPE,
    )


def test_two_processes_appending_and_rewriting_lose_nothing(tmp_path: Path) -> None:
    count = 40
    workers = [_spawn(tmp_path, name, count) for name in ("a", "b")]
    for worker in workers:
        _, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err.decode()
    store = MemoryStore(tmp_path)
    expected = {f"{name}_{i}" for name in "ab" for i in range(count)}
    assert {r.trace_id for r in store.traces()} == expected
    assert len(store.traces()) == 2 * count
    preferences = [e.text for _, e in store.read("L3", "preferences").entries()]
    assert sorted(preferences) == sorted(f"{n} preference {i}" for n in "ab" for i in range(count))
    facts = [e.text for _, e in store.read("L2", "chat").entries()]
    assert sorted(facts) == sorted(f"{n} fact {i}" for n in "ab" for i in range(count))


SLOW_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from deeptutor_jupyter.memory import MemoryStore
    store = MemoryStore(Path(sys.argv[1]))
    print("writing", flush=True)
    store.overwrite("L3", "profile", "## New\\n- new line <!--m_n-->\\n")
    """
)

OLD = "## Old\n" + "".join(f"- old fact {i} <!--m_o{i}-->\n" for i in range(500))


def test_a_writer_killed_mid_write_leaves_the_old_document(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.overwrite("L3", "profile", OLD)
    before = store.read_text("L3", "profile")
    writer = subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, str(tmp_path)],
        cwd=REPO,
        env={**os.environ, SLOW_WRITE_ENV: "30"},
        stdout=subprocess.PIPE,
    )
    assert writer.stdout is not None
    assert writer.stdout.readline() == b"writing\n"
    # Wait until the half-written temporary file exists, then kill the writer.
    deadline = time.monotonic() + 30
    while not list(store.path("L3", "profile").parent.glob(".profile.md.*.tmp")):
        assert time.monotonic() < deadline, "the writer never started its temporary file"
        time.sleep(0.01)
    writer.send_signal(signal.SIGKILL)
    writer.wait(30)
    writer.stdout.close()
    assert writer.returncode == -signal.SIGKILL
    assert store.read_text("L3", "profile") == before
    parse(store.read_text("L3", "profile"), strict=True)
    # The next write clears the torn temporary file and succeeds.
    store.overwrite("L3", "profile", "## New\n- fresh <!--m_f-->\n")
    assert list(store.path("L3", "profile").parent.glob("*.tmp")) == []
    assert store.read_text("L3", "profile") == "## New\n- fresh <!--m_f-->\n"


def test_readers_during_rewrites_see_whole_documents(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.overwrite("L3", "profile", OLD)
    writer = _spawn(tmp_path, "w", 30)

    while writer.poll() is None:
        text = store.read_text("L2", "chat")
        if text:
            parse(text, strict=True)  # never a torn document

    _, err = writer.communicate()
    assert writer.returncode == 0, err.decode()
    assert len(store.read("L2", "chat").entries()) == 30
