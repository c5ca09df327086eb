"""Deferred tools: a one-line manifest, load_tools by exact name, callable in the next round."""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import BaseModel

from deeptutor_jupyter.providers import make_model
from deeptutor_jupyter.runtime.context import ModelProfile, TurnContext
from deeptutor_jupyter.runtime.events import EventLog
from deeptutor_jupyter.runtime.orchestrator import Orchestrator
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolDeps, ToolResult
from deeptutor_jupyter.tools.registry import default_registry


class GcdArgs(BaseModel):
    a: int
    b: int


class GcdTool(Tool):
    name: ClassVar[str] = "gcd"
    description: ClassVar[str] = "Greatest common divisor of two integers."
    Args: ClassVar[type[BaseModel]] = GcdArgs
    deferred: ClassVar[bool] = True

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, GcdArgs)
        return ToolResult(content=str(math.gcd(args.a, args.b)))


def tool_names(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


async def test_a_deferred_tool_is_listed_loaded_and_called():
    registry = default_registry()
    registry.register(GcdTool())
    replies = [
        Reply(tool_calls=[ToolCallSpec("load_tools", {"names": ["gcd", "nope"]}, id="l1")]),
        Reply(tool_calls=[ToolCallSpec("gcd", {"a": 12, "b": 18}, id="g1")]),
        Reply(text="The gcd is 6."),
    ]
    with FakeLLMServer(replies) as server:
        model = make_model(provider="custom", model="fake-model", base_url=server.url)
        loaded: set[str] = set()
        ctx = TurnContext(
            session_id="s",
            turn_id="t",
            question="gcd of 12 and 18?",
            profile=ModelProfile(provider="custom", model="fake-model"),
        )
        turn = Orchestrator(None, registry).start_turn(
            ctx, model, EventLog("t"), ToolDeps(loaded_tools=loaded)
        )
        assert turn.task is not None
        await turn.task
        await model.aclose()
    first, second, third = (r.body for r in server.requests)
    assert "gcd" not in tool_names(first) and "load_tools" in tool_names(first)
    assert "- gcd: Greatest common divisor" in first["messages"][0]["content"]
    assert "gcd" in tool_names(second)
    loaded_msg = next(m for m in second["messages"] if m.get("tool_call_id") == "l1")
    assert (
        "Loaded: gcd" in loaded_msg["content"]
        and "No deferred tool named nope" in loaded_msg["content"]
    )
    assert next(m for m in third["messages"] if m.get("tool_call_id") == "g1")["content"] == "6"
    assert turn.answer == "The gcd is 6." and loaded == {"gcd"}


async def test_without_deferred_tools_load_tools_is_not_offered():
    with FakeLLMServer([Reply(text="hi")]) as server:
        model = make_model(provider="custom", model="fake-model", base_url=server.url)
        ctx = TurnContext(
            session_id="s",
            turn_id="t",
            question="hi",
            profile=ModelProfile(provider="custom", model="fake-model"),
        )
        turn = Orchestrator(None).start_turn(ctx, model, EventLog("t"))
        assert turn.task is not None
        await turn.task
        await model.aclose()
    assert "load_tools" not in tool_names(server.requests[0].body)
    assert "Deferred tools" not in server.requests[0].body["messages"][0]["content"]
