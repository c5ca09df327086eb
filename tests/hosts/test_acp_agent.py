"""The tutor as an ACP agent (``deeptutor-jupyter acp``), driven by the protocol library's own
client over stdio against the fake model: a turn streams its tool call (start and update) and its
answer, and ``ask_user`` is answered through the host's elicitation form or, for a host without
forms, through a permission request whose options are the choices."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import acp
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    ClientCapabilities,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    RequestPermissionResponse,
)

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec

ROOT = Path(__file__).resolve().parents[2]
CHOICE = {
    "title": "Exact or rounded?",
    "mode": "single",
    "options": [{"id": "exact", "label": "Exact"}, {"id": "round", "label": "Rounded"}],
}


class Host:
    """What an ACP host does: shows updates, answers forms and permission requests."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.forms: list[Any] = []
        self.permissions: list[Any] = []
        self.choice = "round"  # the option a permission request is answered with

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.forms.append((message, mode))
        return AcceptElicitationResponse(action="accept", content={"answer": "exact"})

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        self.permissions.append((tool_call, options))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.choice)
        )

    def text(self) -> str:
        return "".join(
            u.content.text for u in self.updates if u.session_update == "agent_message_chunk"
        )


def script() -> list[Reply]:
    return [
        Reply(tool_calls=[ToolCallSpec("calculate", {"expression": "2/3"}, id="c1")]),
        Reply(tool_calls=[ToolCallSpec("ask_user", CHOICE, id="q1")]),
        Reply(chunks=["Two ", "thirds."]),
    ]


async def drive(host: Host, tmp_path: Path, caps: ClientCapabilities, url: str) -> Any:
    env = {
        "DEEPTUTOR_HOME": str(tmp_path / "home"),
        "DEEPTUTOR_PROVIDER": "custom",
        "DEEPTUTOR_BASE_URL": url,
        "DEEPTUTOR_MODEL": "fake",
        "DEEPTUTOR_AUTO_CONSOLIDATE": "false",
        "PYTHONPATH": str(ROOT),
    }
    command = [sys.executable, "-m", "deeptutor_jupyter.cli", "acp"]
    spawned = acp.spawn_agent_process(host, *command, env=env, use_unstable_protocol=True)
    async with spawned as (conn, _process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=caps)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        return await conn.prompt(
            session_id=session.session_id, prompt=[acp.text_block("What is 2/3?")]
        )


async def test_a_turn_streams_its_tool_call_and_asks_through_the_hosts_form(tmp_path: Path) -> None:
    host = Host()
    forms = ClientCapabilities(
        elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())
    )
    with FakeLLMServer(script()) as llm:
        response = await drive(host, tmp_path, forms, llm.url)
    assert response.stop_reason == "end_turn"
    calls = [u for u in host.updates if u.session_update in ("tool_call", "tool_call_update")]
    start, done = calls[0], calls[1]
    assert (start.tool_call_id, start.title, start.status) == ("c1", "calculate", "in_progress")
    assert (done.tool_call_id, done.status) == ("c1", "completed")
    assert done.content[0].content.text == "2/3 = 0.666666666666667"
    ((message, mode),) = host.forms
    assert message == "Exact or rounded?" and mode.tool_call_id == "q1"
    assert [o.const for o in mode.requested_schema.properties["answer"].one_of] == [
        "exact",
        "round",
    ]
    assert host.text() == "Two thirds."
    answered = next(m for m in llm.requests[2].body["messages"] if m.get("tool_call_id") == "q1")
    assert json.loads(answered["content"])["selections"] == ["exact"]


async def test_without_forms_a_choice_is_a_permission_request(tmp_path: Path) -> None:
    host = Host()
    with FakeLLMServer(script()) as llm:
        response = await drive(host, tmp_path, ClientCapabilities(), llm.url)
    assert response.stop_reason == "end_turn" and not host.forms
    ((call, options),) = host.permissions
    assert call.tool_call_id == "q1" and call.title == "Exact or rounded?"
    assert [(o.option_id, o.name) for o in options] == [("exact", "Exact"), ("round", "Rounded")]
    answered = next(m for m in llm.requests[2].body["messages"] if m.get("tool_call_id") == "q1")
    assert json.loads(answered["content"])["selections"] == ["round"]
    assert host.text() == "Two thirds."


async def test_a_question_no_host_control_fits_is_said_in_the_chat_and_the_next_prompt_answers(
    tmp_path: Path,
) -> None:
    host = Host()
    number = {"title": "How many hours a week?", "mode": "number"}
    replies = [
        Reply(tool_calls=[ToolCallSpec("ask_user", number, id="q1")]),
        Reply(text="Six is fine."),
    ]
    env = {
        "DEEPTUTOR_HOME": str(tmp_path / "home"),
        "DEEPTUTOR_PROVIDER": "custom",
        "DEEPTUTOR_MODEL": "fake",
        "DEEPTUTOR_AUTO_CONSOLIDATE": "false",
        "PYTHONPATH": str(ROOT),
    }
    command = [sys.executable, "-m", "deeptutor_jupyter.cli", "acp"]
    with FakeLLMServer(replies) as llm:
        env["DEEPTUTOR_BASE_URL"] = llm.url
        async with acp.spawn_agent_process(host, *command, env=env) as (conn, _process):
            await conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities()
            )
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            first = await conn.prompt(
                session_id=session.session_id, prompt=[acp.text_block("Plan")]
            )
            asked = host.text()
            wrong = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("six")])
            refused = host.text()[len(asked) :]
            second = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("6")])
    assert first.stop_reason == wrong.stop_reason == second.stop_reason == "end_turn"
    assert "**The tutor asks:** How many hours a week?" in asked
    assert "not a number" in refused  # refused, the question still waits
    assert host.text().endswith("Six is fine.")
    answered = next(m for m in llm.requests[1].body["messages"] if m.get("tool_call_id") == "q1")
    assert json.loads(answered["content"])["customInput"] == "6"


async def test_an_mcp_call_waiting_for_approval_is_the_hosts_permission_request(
    tmp_path: Path,
) -> None:
    host = Host()
    host.choice = "allow_once"
    home = tmp_path / "home"
    home.mkdir()
    server = ROOT / "tests" / "tools" / "mcp_calc_server.py"
    (home / "settings.toml").write_text(
        f"[mcp_servers.calc]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(server))}]\napprove = true\n"
    )
    replies = [
        Reply(tool_calls=[ToolCallSpec("mcp__calc__add", {"a": 2, "b": 3}, id="m1")]),
        Reply(text="Five."),
    ]
    forms = ClientCapabilities(
        elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())
    )
    with FakeLLMServer(replies) as llm:
        response = await drive(host, tmp_path, forms, llm.url)
    assert response.stop_reason == "end_turn" and not host.forms
    ((call, options),) = host.permissions
    assert call.tool_call_id == "m1" and call.title == "Allow the MCP server 'calc' to run 'add'?"
    assert [(o.option_id, o.kind) for o in options] == [
        ("allow_once", "allow_once"),
        ("reject_once", "reject_once"),
    ]
    assert host.text() == "Five."
    result = next(m for m in llm.requests[1].body["messages"] if m.get("tool_call_id") == "m1")
    assert result["content"] == "5"
