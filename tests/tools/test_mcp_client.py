"""MCP servers as deferred tools, against a real MCP server (tests/tools/mcp_calc_server.py) over
stdio and streamable HTTP, with the fake model: listed in the manifest, called directly or after
load_tools, a failing server, a hanging one, an elicitation answered as an ask_user question, and
an ``env`` secret that reaches no output. One set of servers serves the whole module."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from deeptutor_jupyter.agent.events import Notice, ToolCallFinished
from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.runtime.session import AskOptions, TutorSession
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from deeptutor_jupyter.testing.ports import free_port
from deeptutor_jupyter.tools.mcp import McpServers, read_servers
from deeptutor_jupyter.tools.mcp.servers import status_markdown
from deeptutor_jupyter.tools.registry import ToolRegistry
from tests.runtime.fake_model_env import use_fake_model

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = Path(__file__).with_name("mcp_calc_server.py")
TOKEN = "calc-token-5f1e9a77c2"
BROKEN_TOKEN = "broken-token-77d1c0ffee"
# A server that cannot start and says why on stderr, with a secret of its env.
BROKEN = (
    "import os, sys; sys.stderr.write('calc.toml not found ' + os.environ['BROKEN_TOKEN']); "
    "sys.exit(3)"
)


def settings_toml(port: int, tmp: Path) -> str:
    python = json.dumps(sys.executable)
    return f"""
[mcp_servers.calc]
command = {python}
args = [{json.dumps(str(SERVER))}]
env = {{ CALC_TOKEN = "{TOKEN}", CALC_PID_FILE = {json.dumps(str(tmp / "calc.pid"))} }}
timeout = 2

[mcp_servers.web]
url = "http://127.0.0.1:{port}/mcp"

[mcp_servers.guarded]
url = "http://127.0.0.1:{port}/mcp"
approve = true

[mcp_servers.broken]
command = {python}
args = ["-c", "{BROKEN}"]
env = {{ BROKEN_TOKEN = "{BROKEN_TOKEN}" }}

[mcp_servers.mute]
command = {python}
args = ["-c", "import time; time.sleep(60)"]
startup_timeout = 1
"""


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """The HTTP server (one process for the module) and the settings.toml every home gets."""
    tmp = tmp_path_factory.mktemp("mcp")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:  # bounded wait for the port to accept
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, (
                "HTTP server did not start"
            )
            time.sleep(0.05)
    try:
        yield tmp, settings_toml(port, tmp)
    finally:
        process.terminate()
        process.wait(10)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def servers(config_dir: tuple[Path, str]) -> AsyncIterator[McpServers]:
    tmp, toml = config_dir
    home = tmp / "first-home"
    home.mkdir()
    (home / "settings.toml").write_text(toml)
    shared = McpServers(read_servers(home))
    yield shared
    await shared.aclose()


@pytest.fixture
def make_session(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    config_dir: tuple[Path, str],
    servers: McpServers,
) -> Callable[[str], TutorSession]:
    def make(url: str) -> TutorSession:
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        (home / "settings.toml").write_text(config_dir[1])
        use_fake_model(monkeypatch, home, url)
        return TutorSession(
            "lesson.ipynb", resolve=lambda f: resolve_settings(flags=f), mcp=servers
        )

    return make


async def run_turn(session: TutorSession, question: str = "Help") -> tuple[Any, list[Any]]:
    """The finished turn and its events (a finished turn's log lets go of them once saved)."""
    turn = session.ask(question, session.resolve({}))
    events: list[Any] = []
    turn.log.subscribe(events.append)
    assert turn.task is not None
    await asyncio.wait_for(asyncio.wait([turn.task]), 60)
    for model in session.models.values():
        await model.aclose()
    return turn, events


def tool_names(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def result_of(body: dict, call_id: str) -> str:
    return next(m["content"] for m in body["messages"] if m.get("tool_call_id") == call_id)


async def test_mcp_tools_are_listed_then_called_directly_or_after_load_tools(make_session):
    replies = [
        Reply(tool_calls=[ToolCallSpec("mcp__calc__add", {"a": 2, "b": 3}, id="c1")]),
        Reply(tool_calls=[ToolCallSpec("load_tools", {"names": ["mcp__web__add"]}, id="l1")]),
        Reply(tool_calls=[ToolCallSpec("mcp__web__add", {"a": 40, "b": 2}, id="w1")]),
        Reply(tool_calls=[ToolCallSpec("mcp__broken__fix", {}, id="b1")]),
        Reply(text="5 and 42."),
    ]
    with FakeLLMServer(replies) as llm:
        session = make_session(llm.url)
        turn, events = await run_turn(session)
    first, second, third, fourth, last = (r.body for r in llm.requests)
    system = first["messages"][0]["content"]
    assert "- mcp__calc__add: [MCP calc] Add two integers." in system
    assert "- mcp__web__pick_color: [MCP web] Ask the learner for a colour." in system
    assert "mcp__broken__*: unavailable (MCP server 'broken': " in system
    assert not [n for n in tool_names(first) if n.startswith("mcp__")]
    assert "load_tools" in tool_names(first)
    # Called without load_tools: loaded and run in the same step, offered from then on.
    assert result_of(second, "c1") == "5" and "mcp__calc__add" in tool_names(second)
    assert "Loaded: mcp__web__add" in result_of(third, "l1")
    assert result_of(fourth, "w1") == "42" and "mcp__web__add" in tool_names(fourth)
    # A failed server's tools: a card that says which server and why; the turn goes on.
    broken = result_of(last, "b1")
    assert "MCP server 'broken'" in broken and "calc.toml not found" in broken
    assert turn.status == "done" and turn.answer == "5 and 42."
    notices = [e.body.text for e in events if isinstance(e.body, Notice)]
    assert any("'broken' did not start" in n and "calc.toml not found" in n for n in notices)
    assert any("'mute' did not start: it did not start within 1 s" in n for n in notices)
    # Loaded tools stay loaded for the conversation's next turn.
    assert {"mcp__calc__add", "mcp__web__add"} <= session._plan().loaded_tools(session.session_id)


async def test_a_server_error_and_a_hang_are_cards_and_the_turn_goes_on(make_session):
    replies = [
        Reply(tool_calls=[ToolCallSpec("mcp__calc__boom", {}, id="e1")]),
        Reply(tool_calls=[ToolCallSpec("mcp__calc__hang", {}, id="h1")]),
        Reply(tool_calls=[ToolCallSpec("mcp__calc__add", {"a": 1, "b": 1}, id="a1")]),
        Reply(text="Done."),
    ]
    with FakeLLMServer(replies) as llm:
        turn, events = await run_turn(make_session(llm.url))
    _, second, third, last = (r.body for r in llm.requests)
    assert result_of(second, "e1").startswith("MCP server 'calc' returned an error for 'boom'")
    assert result_of(third, "h1") == (
        "MCP server 'calc' did not answer 'hang' within 2 s (its timeout); the call was abandoned."
    )
    assert result_of(last, "a1") == "2"  # the server still serves after a hung call
    cards = [e.body for e in events if isinstance(e.body, ToolCallFinished)]
    assert [c.is_error for c in cards] == [True, True, False]
    assert turn.status == "done"


async def test_an_env_secret_reaches_no_output_trace_or_listing(make_session, servers):
    replies = [Reply(tool_calls=[ToolCallSpec("mcp__calc__secret", {}, id="s1")]), Reply(text="ok")]
    with FakeLLMServer(replies) as llm:
        session = make_session(llm.url)
        _, events = await run_turn(session)
    assert result_of(llm.requests[1].body, "s1") == "my token is [redacted]"
    home = session.home
    assert home is not None
    for path in home.rglob("*"):  # the store, the events, the L1 trace, the audit log
        if path.is_file() and path.name != "settings.toml":
            assert TOKEN.encode() not in path.read_bytes(), path
    assert TOKEN not in json.dumps([e.fields() for e in events])
    listed = status_markdown(servers)  # %tutor mcp
    assert "(env: CALC_PID_FILE, CALC_TOKEN)" in listed and TOKEN not in listed
    # A failed server's stderr is shown, without the secrets of its env.
    assert "calc.toml not found [redacted]" in listed and BROKEN_TOKEN not in listed
    assert "| ready | `mcp__calc__add`, " in listed and "calc.toml not found" in listed


async def test_an_elicitation_is_an_ask_user_question_answered_through_the_form(make_session):
    replies = [
        Reply(tool_calls=[ToolCallSpec("mcp__calc__pick_color", {}, id="p1")]),
        Reply(text="Green."),
    ]
    with FakeLLMServer(replies) as llm:
        session = make_session(llm.url)
        turn = session.ask("Plot it", session.resolve({}))
        assert turn.task is not None
        deadline = time.monotonic() + 30
        while not session.pending():  # bounded wait for the question to be saved
            assert time.monotonic() < deadline and not turn.task.done()
            await asyncio.sleep(0.02)
        (row,) = session.pending()
        assert row.tool_call_id == "p1" and row.kind == "ask_user"
        assert row.payload["mode"] == "single"
        assert [o["id"] for o in row.payload["options"]] == ["red", "green", "blue"]
        assert row.payload["title"] == "Which colour should the plot use?"
        # A learner slower than the server's timeout (2 s): their time is not the server's.
        await asyncio.sleep(3.5)
        session.submit(row.session_id, row.request_id, ["green"])
        await asyncio.wait_for(asyncio.wait([turn.task]), 30)
        for model in session.models.values():
            await model.aclose()
    assert result_of(llm.requests[1].body, "p1") == "chose green"
    assert turn.answer == "Green."


async def test_servers_start_once_and_stop_when_closed(config_dir):
    tmp, toml = config_dir
    home = tmp / "own-home"
    home.mkdir()
    (home / "settings.toml").write_text(toml.split("[mcp_servers.web]")[0])
    own = McpServers(read_servers(home))
    registry = ToolRegistry()
    assert own.pending() and registry.get("mcp__calc__add") is None  # nothing started yet
    await own.discover(registry)
    await own.discover(registry)  # once: a second turn starts nothing
    pid = int((tmp / "calc.pid").read_text())
    assert registry.get("mcp__calc__add") is not None
    os.kill(pid, 0)  # running
    await own.aclose()
    assert own.status()[0]["state"] == "stopped"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_turn_that_cannot_load_tools_starts_no_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config_dir: tuple[Path, str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.toml").write_text(config_dir[1].split("[mcp_servers.web]")[0])
    with FakeLLMServer([Reply(text="Four.")]) as llm:
        use_fake_model(monkeypatch, home, llm.url)
        session = TutorSession("lesson.ipynb", resolve=lambda f: resolve_settings(flags=f))
        options = AskOptions(user_tools=("calculate",))  # --tools calculate
        turn = session.ask("2+2?", session.resolve({}), options)
        assert turn.task is not None
        await asyncio.wait_for(asyncio.wait([turn.task]), 30)
        for model in session.models.values():
            await model.aclose()
    assert session.mcp is not None and session.mcp.status()[0]["state"] == "not started"
    assert turn.answer == "Four."
    session.close()


async def test_a_course_pack_allow_list_leaves_out_the_other_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config_dir: tuple[Path, str]
) -> None:
    import hashlib

    from deeptutor_jupyter.hub.packs import manifest_of
    from deeptutor_jupyter.runtime.course_files import build_archive, install

    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.toml").write_text(config_dir[1])
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "TUTOR.md").write_text("---\nmcp_servers: [calc, elsewhere]\n---\nBe brief.\n")
    archive = build_archive(pack)
    listing = {
        "name": "algebra",
        "version": 1,
        "group": None,
        "sha256": hashlib.sha256(archive).hexdigest(),
        "files": manifest_of(archive),
        "published_by": "ms-lee",
    }
    install(home, listing, archive)
    use_fake_model(monkeypatch, home, "http://127.0.0.1:9/v1")
    session = TutorSession("lesson.ipynb", resolve=lambda f: resolve_settings(flags=f))
    session.open(session.resolve({}))
    assert session.mcp is not None
    assert [s["name"] for s in session.mcp.status()] == ["calc"]
    listed = status_markdown(session.mcp)
    assert "mcp_servers.web not started: the course (algebra v1) allows calc, elsewhere" in listed
    session.close()


async def test_a_server_with_approve_asks_the_learner_before_each_call(make_session):
    replies = [
        Reply(tool_calls=[ToolCallSpec("mcp__guarded__add", {"a": 1, "b": 2}, id="g1")]),
        Reply(tool_calls=[ToolCallSpec("mcp__guarded__add", {"a": 3, "b": 4}, id="g2")]),
        Reply(text="Seven."),
    ]
    with FakeLLMServer(replies) as llm:
        session = make_session(llm.url)
        turn = session.ask("Add", session.resolve({}))
        assert turn.task is not None
        for choice in ("reject_once", "allow_once"):
            deadline = time.monotonic() + 30
            while not session.pending():  # bounded wait for the approval question
                assert time.monotonic() < deadline and not turn.task.done()
                await asyncio.sleep(0.02)
            (row,) = session.pending()
            assert row.payload["title"] == "Allow the MCP server 'guarded' to run 'add'?"
            assert row.payload["description"].startswith("Arguments (written by the model): {")
            session.submit(row.session_id, row.request_id, [choice])
            while session.pending() == [row]:  # consumed, then the call goes on
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
        await asyncio.wait_for(asyncio.wait([turn.task]), 30)
        for model in session.models.values():
            await model.aclose()
    second, third = llm.requests[1].body, llm.requests[2].body
    assert result_of(second, "g1") == "The learner did not allow MCP server 'guarded' to run 'add'."
    assert result_of(third, "g2") == "7"
    assert turn.answer == "Seven."
