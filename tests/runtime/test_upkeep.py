"""Background consolidation after turns (runtime/upkeep.py), against FakeLLMServer.

Turns and consolidation share the scripted server here, so each test scripts both and checks
that the consolidation took exactly its own replies.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.memory import MemoryStore
from deeptutor_jupyter.memory.runs import RunLog
from deeptutor_jupyter.runtime.session import AskOptions, TutorSession
from deeptutor_jupyter.runtime.upkeep import due_documents
from deeptutor_jupyter.testing import FakeLLMServer, Reply

CONSOLIDATION_SYSTEM = "ops"  # every consolidation prompt asks for {"ops": [...]}


@pytest.fixture
async def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        for name, value in {
            "DEEPTUTOR_HOME": str(tmp_path / "home"),
            "DEEPTUTOR_PROVIDER": "custom",
            "DEEPTUTOR_BASE_URL": fake.url,
            "DEEPTUTOR_MODEL": "fake",
            "DEEPTUTOR_API_KEY": "sk-upkeep-SECRET-0123",
            "DEEPTUTOR_AUTO_CONSOLIDATE": "true",
            "DEEPTUTOR_CONSOLIDATE_EVERY": "2",
        }.items():
            monkeypatch.setenv(name, value)
        yield fake


@pytest.fixture
async def session(server: FakeLLMServer) -> AsyncIterator[TutorSession]:
    tutor = TutorSession("lesson.ipynb", resolve=lambda f: resolve_settings(flags=f))
    yield tutor
    assert tutor.upkeep.join(20)
    for model in tutor.models.values():
        await model.aclose()


async def turn(session: TutorSession, question: str) -> str:
    """One finished turn; its trace id."""
    t = session.ask(question, session.resolve({}), AskOptions())
    assert t.task is not None
    await t.task
    assert t.trace is not None
    return t.trace.trace_id


def ops_reply(*ops: dict) -> Reply:
    return Reply(text=json.dumps({"ops": list(ops)}))


def memory(session: TutorSession) -> MemoryStore:
    assert session.memory is not None
    return session.memory


async def test_enough_new_traces_consolidate_l2_and_the_profile_in_the_background(session, server):
    server.add(Reply(text="An eigenvector keeps its direction."))
    first = await turn(session, "What is an eigenvector?")
    assert session.upkeep.join(20)
    assert not RunLog(memory(session).root).path.exists()  # one trace: not due yet
    assert len(server.requests) == 1

    server.extend(
        [
            Reply(text="Seven."),
            ops_reply({"op": "add", "section": "Topics", "text": "Eigenvectors", "refs": [first]}),
            ops_reply({"op": "add", "section": "Level", "text": "Beginner", "refs": [first]}),
        ]
    )
    second = await turn(session, "And 2*3+1?")
    assert session.upkeep.join(20)

    assert server.pending == 0 and len(server.requests) == 4
    for request in server.requests[2:]:
        assert CONSOLIDATION_SYSTEM in request.body["messages"][0]["content"]
        assert request.body["model"] == "fake"  # the configured model
    l2 = memory(session).read("L2", "notebook")
    profile = memory(session).read("L3", "profile")
    assert [(e.text, e.refs) for _, e in l2.entries()] == [("Eigenvectors", [first])]
    assert [(e.text, e.refs) for _, e in profile.entries()] == [("Beginner", [first])]
    [run] = RunLog(memory(session).root).recent()
    assert run.trigger == "auto" and run.model == "openai-compatible/fake" and not run.failed
    by_doc = {d.document: d for d in run.documents}
    assert set(by_doc) == {"L2/notebook.md", "L3/profile.md"}
    for doc, entry in ((by_doc["L2/notebook.md"], l2), (by_doc["L3/profile.md"], profile)):
        assert doc.consumed == sorted([first, second])
        [(_, added)] = entry.entries()
        assert doc.ops == [{"op": "add", "id": f"m_{added.id}", "refs": [first]}]
    assert memory(session).seen_traces("L3", "profile") == {first, second}


async def test_running_it_again_on_the_same_traces_asks_nothing_and_changes_nothing(
    session, server
):
    server.extend([Reply(text="a"), Reply(text="b"), ops_reply(), ops_reply()])
    await turn(session, "one")
    await turn(session, "two")
    assert session.upkeep.join(20)
    store = memory(session)
    before = {p: p.read_bytes() for p in store.root.rglob("*") if p.is_file()}
    asked = len(server.requests)
    assert asked == 4

    assert await session.upkeep.run_once(store) is None  # nothing due
    assert due_documents(store, 1, RunLog(store.root)) == []
    after = {p: p.read_bytes() for p in store.root.rglob("*") if p.is_file()}
    assert after == before and len(server.requests) == asked


async def test_a_turn_ends_without_waiting_for_a_slow_consolidation(session, server):
    slow = Reply(text=json.dumps({"ops": []}), delay=4.0)  # ample on a loaded machine
    server.extend([Reply(text="a"), Reply(text="b"), slow, ops_reply()])
    await turn(session, "one")
    t = session.ask("two", session.resolve({}), AskOptions())
    assert t.task is not None
    await t.task
    # The turn is over while the consolidation it started still waits for the model.
    thread = session.upkeep._thread
    assert thread is not None and thread.is_alive()
    assert session.upkeep.join(20)
    assert [d.status for d in RunLog(memory(session).root).recent()[0].documents] == [
        "done",
        "done",
    ]


async def test_an_unreadable_reply_loses_nothing_is_logged_and_is_not_retried_every_turn(
    session, server
):
    server.extend(
        [Reply(text="a"), Reply(text="b"), Reply(text="The learner likes maths."), ops_reply()]
    )
    first = await turn(session, "one")
    await turn(session, "two")
    assert session.upkeep.join(20)
    store = memory(session)
    [run] = RunLog(store.root).recent()
    l2 = {d.document: d for d in run.documents}["L2/notebook.md"]
    assert l2.status == "failed" and "not JSON" in l2.error and l2.consumed == []
    assert run.failed
    assert store.seen_traces("L2", "notebook") == set()  # offered again later
    assert store.read("L2", "notebook").is_empty()
    assert first in store.known_trace_ids()

    # The next turn does not ask the broken model again for L2: it waits for 2 more traces.
    server.add(Reply(text="c"))
    await turn(session, "three")
    assert session.upkeep.join(20)
    assert server.pending == 0 and len(server.requests) == 5
    assert len(RunLog(store.root).recent()) == 1


async def test_without_a_model_the_failure_is_logged_not_raised(
    session, server, monkeypatch: pytest.MonkeyPatch
):
    server.extend([Reply(text="a"), Reply(text="b")])
    await turn(session, "one")
    # The configured model goes away after the turn started (say, settings edited).
    monkeypatch.delenv("DEEPTUTOR_PROVIDER")
    monkeypatch.delenv("DEEPTUTOR_BASE_URL")
    await turn_with_explicit_model(session, server, "two")
    assert session.upkeep.join(20)
    [run] = RunLog(memory(session).root).recent()
    assert run.error.startswith("no model is configured") and run.failed
    assert all(d.status == "failed" and d.consumed == [] for d in run.documents)
    assert "SECRET" not in RunLog(memory(session).root).path.read_text()


async def turn_with_explicit_model(session: TutorSession, server: FakeLLMServer, q: str) -> None:
    flags = {"provider": "custom", "base_url": server.url}
    t = session.ask(q, session.resolve(flags), AskOptions())
    assert t.task is not None
    await t.task


async def test_turned_off_it_does_nothing(session, server, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DEEPTUTOR_AUTO_CONSOLIDATE", "false")
    server.extend([Reply(text="a"), Reply(text="b"), Reply(text="c")])
    for q in ("one", "two", "three"):
        await turn(session, q)
        assert session.upkeep.join(20)
    assert server.pending == 0 and len(server.requests) == 3
    assert not RunLog(memory(session).root).path.exists()
