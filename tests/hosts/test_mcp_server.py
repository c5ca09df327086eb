"""The tutor as an MCP server (``deeptutor-jupyter mcp``), end to end: the official SDK's client
calls it over stdio (a client with forms: the tutor's question is an elicitation) and over
streamable HTTP (a client without: "waiting for the learner", then ``answer``), against the fake
model. One server process per transport for the module."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from deeptutor_jupyter.knowledge import KnowledgeBase
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from deeptutor_jupyter.testing.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
CHOICE = {
    "title": "Which topic first?",
    "mode": "single",
    "options": [{"id": "vec", "label": "Vectors"}, {"id": "mat", "label": "Matrices"}],
}
NUMBER = {"title": "How many hours a week?", "mode": "number"}
QUIZ = {
    "title": "Eigenvalues, check 1",
    "objective": "eigenvalues",
    "questions": [
        {
            "id": "q1",
            "kind": "choice",
            "prompt": "If $A v = 3 v$, what is $3$?",
            "options": [
                {"id": "a", "label": "an eigenvector"},
                {"id": "b", "label": "an eigenvalue"},
            ],
            "answer": ["b"],
            "explanation": "SECRET-EXPLANATION",
        }
    ],
}
SCRIPT = [
    Reply(tool_calls=[ToolCallSpec("ask_user", CHOICE, id="q1")]),
    Reply(text="Matrices it is."),
    Reply(tool_calls=[ToolCallSpec("ask_user", NUMBER, id="q2")]),
    Reply(text="Six hours is plenty."),
    Reply(tool_calls=[ToolCallSpec("make_quiz", QUIZ, id="z1")]),
    Reply(text="Well done."),
    Reply(tool_calls=[ToolCallSpec("ask_user", CHOICE, id="q3")]),
    Reply(text="Vectors first, then."),
]


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[FakeLLMServer, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("tutor-mcp")
    notes = tmp / "notes"
    notes.mkdir()
    (notes / "eigen.md").write_text("# Eigenvalues\n\nAn eigenvector keeps its direction.\n")
    KnowledgeBase(tmp / "home", "linalg").add_sources([notes])
    with FakeLLMServer(SCRIPT) as llm:
        env = {
            "DEEPTUTOR_HOME": str(tmp / "home"),
            "DEEPTUTOR_PROVIDER": "custom",
            "DEEPTUTOR_BASE_URL": llm.url,
            "DEEPTUTOR_MODEL": "fake",
            "DEEPTUTOR_AUTO_CONSOLIDATE": "false",
            "PYTHONPATH": str(ROOT),
        }
        yield llm, env


def command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "deeptutor_jupyter.cli", "mcp", *extra]


async def text_of(client: Client, tool: str, arguments: dict) -> str:
    return (await client.call_tool(tool, arguments)).content[0].text


async def test_over_stdio_a_question_is_an_elicitation_form(world) -> None:
    llm, env = world
    asked: list[types.ElicitRequestParams] = []

    async def learner(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"answer": "mat"})

    server = StdioServerParameters(command=command()[0], args=command()[1:], env=env)
    async with Client(server, elicitation_callback=learner) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"ask", "answer", "pending", "search_knowledge", "quiz", "answer_quiz"} <= names
        result = await client.call_tool("ask", {"question": "Where do we start?"})
        found = await client.call_tool(
            "search_knowledge", {"knowledge_base": "linalg", "query": "eigenvector direction"}
        )
    assert result.content[0].text == "Matrices it is."
    (form,) = asked
    assert form.message == "Which topic first?"
    assert form.requested_schema["properties"]["answer"]["oneOf"] == [
        {"const": "vec", "title": "Vectors"},
        {"const": "mat", "title": "Matrices"},
    ]
    # The learner's choice reached the model as ask_user's result, by option id.
    answered = next(m for m in llm.requests[1].body["messages"] if m.get("tool_call_id") == "q1")
    assert json.loads(answered["content"])["selections"] == ["mat"]
    assert "An eigenvector keeps its direction." in found.content[0].text


async def test_over_http_without_forms_the_tutor_waits_for_the_learner(world) -> None:
    llm, env = world
    port = free_port()
    token = "a-token-for-this-test-only"
    process = subprocess.Popen(
        command("--http", str(port)),
        env={**os.environ, **env, "DEEPTUTOR_MCP_TOKEN": token},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:  # bounded wait for the port
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        # Loopback is every account's on a shared machine: no token, no tutor.
        for given in ({}, {"Authorization": "Bearer wrong"}):
            refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                 headers=given)  # fmt: skip
            assert refused.status_code == 401 and "bearer token" in refused.text
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            waiting = (await client.call_tool("ask", {"question": "Plan my week"})).content[0].text
            listed = (await client.call_tool("pending", {})).content[0].text
            request_id = waiting.split("request_id ")[1].split(",")[0]
            wrong = (
                (await client.call_tool("answer", {"request_id": request_id, "text": "six"}))
                .content[0]
                .text
            )
            done = (
                (await client.call_tool("answer", {"request_id": request_id, "text": "6"}))
                .content[0]
                .text
            )
            quiz = await text_of(client, "quiz", {"topic": "eigenvalues", "questions": 1})
            quiz_id = quiz.split("quiz_id ")[1].split(")")[0]
            graded = await text_of(
                client, "answer_quiz", {"quiz_id": quiz_id, "answers": {"q1": ["b"]}}
            )
    finally:
        process.terminate()
        process.wait(10)
    assert waiting.startswith("Waiting for the learner.")
    assert "How many hours a week?" in waiting and request_id.startswith("ask_")
    assert request_id in listed
    assert wrong.startswith("Error: ") and "number" in wrong.lower()  # refused, still answerable
    assert done == "Six hours is plenty."
    answered = next(m for m in llm.requests[3].body["messages"] if m.get("tool_call_id") == "q2")
    assert json.loads(answered["content"])["customInput"] == "6"
    # A quiz: its questions without their answers, then graded once answered.
    assert quiz.startswith("Waiting for the learner.") and "- q1: If $A v = 3 v$" in quiz
    assert "    - b: an eigenvalue" in quiz and "SECRET-EXPLANATION" not in quiz
    assert graded == "Well done."
    result = next(m for m in llm.requests[5].body["messages"] if m.get("tool_call_id") == "z1")
    assert json.loads(result["content"])["score"] == 1


async def test_a_client_on_the_older_protocol_gets_the_form_mid_call(world) -> None:
    """Hosts on the 2025 protocol get ``elicitation/create`` while the call runs."""
    llm, env = world
    asked: list[str] = []

    async def learner(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "vec"})

    server = StdioServerParameters(command=command()[0], args=command()[1:], env=env)
    async with Client(server, elicitation_callback=learner, mode="legacy") as client:
        assert not client.protocol_version.startswith("2026")
        done = await text_of(client, "ask", {"question": "Where do we start, again?"})
    assert asked == ["Which topic first?"] and done == "Vectors first, then."
    answered = next(m for m in llm.requests[7].body["messages"] if m.get("tool_call_id") == "q3")
    assert json.loads(answered["content"])["selections"] == ["vec"]
