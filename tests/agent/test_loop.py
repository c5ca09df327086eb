"""The chat loop through the real stack: make_model over httpx against FakeLLMServer on loopback.

Nothing here mocks the model or the transport. Each test scripts the replies, runs one turn with a
real ToolRegistry and checks three things: the events the loop emitted, the LoopResult, and the
requests the server actually received.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from pydantic import BaseModel

from deeptutor_jupyter.agent.loop import (
    CONTINUE_PROMPT,
    EMPTY_NUDGE,
    FORCE_PROMPT,
    MAX_CONTINUATIONS,
    MAX_ROUND_CHARS,
    MAX_SETTLEMENT_ROUNDS,
    MAX_TOOL_CALLS,
    ROUND_CUT,
    SETTLE_PROMPT,
    AgentLoop,
    LoopResult,
    too_many_calls,
)
from deeptutor_jupyter.agent.text_tools import text_tool_instructions
from deeptutor_jupyter.providers import Message, ToolCall, make_model
from deeptutor_jupyter.testing import FakeLLMServer, RecordedRequest, Reply, ToolCallSpec
from deeptutor_jupyter.tools import Tool, ToolContext, ToolRegistry, ToolResult, default_registry

SYSTEM = "You are a test tutor."
QUESTION: Message = {"role": "user", "content": "What is 6*7?"}
TOOL_REJECTION = Reply(status=400, error="This model does not support tools.")
DSML = (
    "Checking.\n"
    "<｜｜DSML｜｜function_calls>\n"
    '<｜｜DSML｜｜invoke name="calculate">\n'
    '<｜｜DSML｜｜parameter name="expression" string="true">6*7</｜｜DSML｜｜parameter>\n'
    "</｜｜DSML｜｜invoke>\n"
    "</｜｜DSML｜｜function_calls>"
)


class NoArgs(BaseModel):
    pass


class StopTool(Tool):
    """Stands in for a cancelled ask_user: its result ends the turn."""

    name: ClassVar[str] = "stop_here"
    description: ClassVar[str] = "Ends the turn."
    Args: ClassVar[type[BaseModel]] = NoArgs

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        return ToolResult(content="The learner cancelled.", stop_turn=True)


class BoomTool(Tool):
    name: ClassVar[str] = "boom"
    description: ClassVar[str] = "Always fails."
    Args: ClassVar[type[BaseModel]] = NoArgs

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        raise RuntimeError("kaput")


@dataclass
class Turn:
    result: LoopResult
    events: list[tuple[str, dict[str, Any]]]
    requests: list[RecordedRequest]
    executed: list[ToolCall] = field(default_factory=list)
    bodies_emitted: list[Any] = field(default_factory=list)  # the event objects themselves

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [data for name, data in self.events if name == kind]

    def text(self, kind: str) -> str:
        return "".join(data["text"] for data in self.of(kind))

    def kinds(self) -> list[str]:
        """Event kinds with consecutive repeats collapsed, since text arrives in several deltas."""
        out: list[str] = []
        for name, _ in self.events:
            if not out or out[-1] != name:
                out.append(name)
        return out

    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def registry() -> ToolRegistry:
    reg = default_registry()
    reg.register(StopTool())
    reg.register(BoomTool())
    return reg


async def run_turn(
    server: FakeLLMServer,
    registry: ToolRegistry,
    replies: Sequence[Reply],
    *,
    max_rounds: int = 8,
    history: Sequence[Message] = (),
    tools: Sequence[str] | None = ("calculate",),
    tmp: Path = Path("."),
    max_tool_calls: int = MAX_TOOL_CALLS,
    max_round_chars: int = MAX_ROUND_CHARS,
) -> Turn:
    server.extend(replies)
    # In-process: the same script and request log without a socket (the tests below that
    # build their own model keep the loopback path covered). No retries: a script that runs
    # out gets a 500 at once instead of a backoff.
    client = httpx.AsyncClient(transport=server.transport())
    model = make_model(
        provider="custom", model="fake-model", base_url=server.url, max_retries=0, client=client
    )
    events: list[tuple[str, dict[str, Any]]] = []
    emitted: list[Any] = []
    executed: list[ToolCall] = []
    ctx = ToolContext(session_id="s", turn_id="t", workspace=tmp)

    async def execute(call: ToolCall) -> ToolResult:
        executed.append(call)
        return await registry.execute(call, ctx)

    def emit(event: Any) -> None:
        emitted.append(event)
        events.append((event.type, event.model_dump(exclude_unset=True, exclude={"type"})))

    loop = AgentLoop(
        model,
        execute,
        emit,
        tools=registry.schemas(tools),
        max_rounds=max_rounds,
        max_tool_calls=max_tool_calls,
        max_round_chars=max_round_chars,
    )
    try:
        result = await loop.run(SYSTEM, list(history), QUESTION)
    finally:
        await model.aclose()
        await client.aclose()  # a client handed in stays its owner's to close
    assert server.pending == 0, "every scripted reply should have been used"
    return Turn(result, events, server.requests, executed, emitted)


def calc(expression: str, call_id: str) -> ToolCallSpec:
    return ToolCallSpec("calculate", {"expression": expression}, id=call_id)


def last_user(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


def contents(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"]]


# --- answer vs narration ----------------------------------------------------------------------


async def test_a_round_without_tool_calls_is_the_answer(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"}]
    turn = await run_turn(
        server,
        registry,
        [Reply(text="Six times seven is 42.", usage={"prompt_tokens": 10, "completion_tokens": 5})],
        history=history,
    )
    r = turn.result
    assert (r.answer, r.rounds, r.stopped_by) == ("Six times seven is 42.", 1, "answer")
    assert r.messages == [{"role": "assistant", "content": "Six times seven is 42."}]
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (10, 5)
    assert turn.kinds() == ["round_started", "content"]
    assert turn.of("round_started") == [{"round": 1, "phase": "exploration"}]
    assert turn.text("content") == r.answer
    [body] = turn.bodies()
    assert body["messages"] == [{"role": "system", "content": SYSTEM}, *history, QUESTION]
    assert body["tools"] == registry.schemas(["calculate"])
    assert body["model"] == "fake-model"


async def test_a_round_with_tool_calls_is_narration_and_the_loop_goes_on(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    turn = await run_turn(
        server,
        registry,
        [
            Reply(
                text="Let me compute.",
                tool_calls=[calc("6*7", "call_a"), calc("6+7", "call_b")],
                usage={"prompt_tokens": 10, "completion_tokens": 4},
            ),
            Reply(text="It is 42.", usage={"prompt_tokens": 30, "completion_tokens": 3}),
        ],
    )
    r = turn.result
    assert (r.answer, r.rounds, r.stopped_by) == ("It is 42.", 2, "answer")
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (40, 7)
    assert turn.kinds() == [
        "round_started",
        "content",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "round_started",
        "content",
    ]
    assert [(e["id"], e["name"]) for e in turn.of("tool_call")] == [
        ("call_a", "calculate"),
        ("call_b", "calculate"),
    ]
    assert [(e["id"], e["content"], e["is_error"]) for e in turn.of("tool_result")] == [
        ("call_a", "6*7 = 42", False),
        ("call_b", "6+7 = 13", False),
    ]
    # Canonical native form, whatever the endpoint speaks.
    added = [
        {
            "role": "assistant",
            "content": "Let me compute.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "calculate", "arguments": '{"expression": "6*7"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "calculate", "arguments": '{"expression": "6+7"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "6*7 = 42"},
        {"role": "tool", "tool_call_id": "call_b", "content": "6+7 = 13"},
    ]
    assert r.messages == [*added, {"role": "assistant", "content": "It is 42."}]
    second = turn.bodies()[1]
    assert second["messages"] == [{"role": "system", "content": SYSTEM}, QUESTION, *added]
    assert "tools" in second


# --- a cap on tool calls per message --------------------------------------------------------


async def test_thousands_of_tool_calls_in_one_message_run_the_cap_and_get_one_refusal(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    asked = 3000
    flood = Reply(tool_calls=[calc(f"{i}+1", f"call_{i}") for i in range(asked)])
    turn = await run_turn(server, registry, [flood, Reply(text="Done.")])
    limit = MAX_TOOL_CALLS
    refusal = too_many_calls(asked, limit)
    assert "32" in refusal and "3000" in refusal
    # The turn goes on to the answer; only the cap's worth ran.
    assert (turn.result.answer, turn.result.stopped_by) == ("Done.", "answer")
    assert [c.id for c in turn.executed] == [f"call_{i}" for i in range(limit)]
    # One card more than the calls that ran: the refusal, said once.
    assert len(turn.of("tool_call")) == len(turn.of("tool_result")) == limit + 1
    refused = [e for e in turn.of("tool_result") if e["content"] == refusal]
    assert [(e["id"], e["is_error"]) for e in refused] == [(f"call_{limit}", True)]
    # The model reads the refusal, and every call its next request shows has a result.
    second = turn.bodies()[1]["messages"]
    [assistant] = [m for m in second if m.get("tool_calls")]
    shown = [c["id"] for c in assistant["tool_calls"]]
    results = [m["tool_call_id"] for m in second if m["role"] == "tool"]
    assert shown == results and len(shown) == limit + 1
    assert {"role": "tool", "tool_call_id": f"call_{limit}", "content": refusal} in second


async def test_the_cell_view_of_a_flooded_message_stays_small(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    from deeptutor_jupyter.kernel.widgets.turn_view import TurnView
    from deeptutor_jupyter.runtime.events import Event

    flood = Reply(tool_calls=[calc("1", f"c{i}") for i in range(3000)])
    turn = await run_turn(server, registry, [flood, Reply(text="ok")], max_tool_calls=5)
    view = TurnView(model_label="custom/fake")
    for seq, body in enumerate(turn.bodies_emitted, 1):
        view.handle(Event(body, seq, "t", 0.0))
    assert len(view._cards) == 6  # five calls and the one refusal
    assert len(turn.executed) == 5


async def test_a_message_at_the_cap_runs_every_call(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    calls = [calc("2", f"c{i}") for i in range(3)]
    turn = await run_turn(
        server, registry, [Reply(tool_calls=calls), Reply(text="ok")], max_tool_calls=3
    )
    assert len(turn.executed) == 3
    assert all("Refused" not in e["content"] for e in turn.of("tool_result"))


async def test_a_reply_that_streams_past_the_round_limit_is_cut_and_says_so(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    limit = 5_000
    endless = Reply(reasoning="r" * 3_000, chunks=["x" * 1_000] * 200)  # 200k characters
    turn = await run_turn(server, registry, [endless], max_round_chars=limit)
    note = ROUND_CUT.format(limit=limit)
    assert note.strip() in turn.result.answer and "5,000" in note
    streamed = turn.text("content") + turn.text("thinking")
    assert len(streamed) <= limit + len(note)
    assert turn.result.messages[-1]["content"] == turn.result.answer  # what is stored is cut
    assert len(turn.result.answer) <= limit + len(note)
    assert (turn.result.stopped_by, turn.result.rounds) == ("answer", 1)


# --- budget, settlement, forced finish -------------------------------------------------------


async def test_budget_then_three_settlement_rounds_then_a_forced_finish(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    tool_rounds = 2 + MAX_SETTLEMENT_ROUNDS
    replies = [Reply(tool_calls=[calc(f"{i}+1", f"call_{i}")]) for i in range(tool_rounds)]
    # Still asking for a tool in the forced round: it must not run.
    replies.append(Reply(text="Final answer.", tool_calls=[calc("9", "call_late")]))
    turn = await run_turn(server, registry, replies, max_rounds=2)
    r = turn.result
    assert len(turn.requests) == 6
    assert (r.answer, r.rounds, r.stopped_by) == ("Final answer.", 6, "forced")
    assert [e["phase"] for e in turn.of("round_started")] == [
        "exploration",
        "exploration",
        "settlement",
        "settlement",
        "settlement",
        "forced",
    ]
    assert [c.id for c in turn.executed] == [f"call_{i}" for i in range(5)]
    bodies = turn.bodies()
    for body in bodies[:2]:
        assert "tools" in body
        assert SETTLE_PROMPT not in contents(body) and FORCE_PROMPT not in contents(body)
    for body in bodies[2:5]:
        assert "tools" in body
        assert last_user(body) == SETTLE_PROMPT
        assert contents(body).count(SETTLE_PROMPT) == 1
    forced = bodies[5]
    assert "tools" not in forced
    assert last_user(forced) == FORCE_PROMPT
    assert SETTLE_PROMPT not in contents(forced)
    # With no tool definitions sent, earlier tool exchanges travel as text (Anthropic
    # rejects tool_result blocks in a request without tools).
    assert all(m["role"] != "tool" and not m.get("tool_calls") for m in forced["messages"])
    assert any("<tool_result" in c for c in contents(forced))
    # The steering prompts are transient: they never enter the conversation.
    kept = [m.get("content") for m in r.messages]
    assert SETTLE_PROMPT not in kept and FORCE_PROMPT not in kept
    assert r.messages[-1] == {"role": "assistant", "content": "Final answer."}
    assert len(r.messages) == 2 * tool_rounds + 1


async def test_an_answer_during_settlement_ends_the_turn(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    turn = await run_turn(
        server,
        registry,
        [Reply(tool_calls=[calc("6*7", "call_a")]), Reply(text="42.")],
        max_rounds=1,
    )
    assert len(turn.requests) == 2
    assert (turn.result.answer, turn.result.stopped_by, turn.result.rounds) == ("42.", "answer", 2)
    assert last_user(turn.bodies()[1]) == SETTLE_PROMPT


async def test_text_tool_markup_in_the_forced_round_is_hidden_and_not_run(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    replies = [Reply(tool_calls=[calc("1", f"call_{i}")]) for i in range(1 + MAX_SETTLEMENT_ROUNDS)]
    replies.append(
        Reply(
            text='<tool_call>{"name": "calculate", "arguments": {"expression": "2"}}</tool_call>4'
        )
    )
    turn = await run_turn(server, registry, replies, max_rounds=1)
    assert (turn.result.answer, turn.result.stopped_by) == ("4", "forced")
    assert len(turn.executed) == 1 + MAX_SETTLEMENT_ROUNDS
    assert "tool_call>" not in turn.text("content")


# --- length continuation ----------------------------------------------------------------------


@pytest.mark.parametrize("reason", ["length", "max_tokens"])
async def test_a_reply_cut_by_length_is_continued_without_repeating(
    server: FakeLLMServer, registry: ToolRegistry, reason: str
) -> None:
    turn = await run_turn(
        server,
        registry,
        [
            Reply(text="The first half, ", finish_reason=reason),
            Reply(text="and the second half."),
        ],
    )
    r = turn.result
    assert len(turn.requests) == 2
    assert r.answer == "The first half, and the second half."
    assert (r.rounds, r.stopped_by) == (1, "answer")
    assert r.messages == [{"role": "assistant", "content": r.answer}]
    assert turn.text("content") == r.answer
    assert len(turn.of("notice")) == 1
    first, second = turn.bodies()
    assert second["messages"] == [
        *first["messages"],
        {"role": "assistant", "content": "The first half, "},
        {"role": "user", "content": CONTINUE_PROMPT},
    ]


async def test_continuations_are_bounded(server: FakeLLMServer, registry: ToolRegistry) -> None:
    replies = [
        Reply(text=f"part{i} ", finish_reason="length") for i in range(MAX_CONTINUATIONS + 1)
    ]
    turn = await run_turn(server, registry, replies)
    assert len(turn.requests) == MAX_CONTINUATIONS + 1
    assert turn.result.answer == "part0 part1 part2 part3 "
    last = turn.bodies()[-1]["messages"]
    assert last[-2] == {"role": "assistant", "content": "part0 part1 part2 "}
    assert contents(turn.bodies()[-1]).count(CONTINUE_PROMPT) == 1


async def test_a_continuation_in_settlement_follows_the_settle_prompt(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    turn = await run_turn(
        server,
        registry,
        [
            Reply(tool_calls=[calc("1", "call_a")]),
            Reply(text="Wrapping ", finish_reason="length"),
            Reply(text="up."),
        ],
        max_rounds=1,
    )
    assert turn.result.answer == "Wrapping up."
    tail = turn.bodies()[2]["messages"][-3:]
    # The prefix answered the settle prompt, so it comes after it.
    assert tail == [
        {"role": "user", "content": SETTLE_PROMPT},
        {"role": "assistant", "content": "Wrapping "},
        {"role": "user", "content": CONTINUE_PROMPT},
    ]


async def test_tool_calls_after_a_cut_keep_the_prefix_as_narration(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    turn = await run_turn(
        server,
        registry,
        [
            Reply(text="First I ", finish_reason="length"),
            Reply(text="check.", tool_calls=[calc("6*7", "call_a")]),
            Reply(text="42."),
        ],
    )
    r = turn.result
    assert r.answer == "42."
    assert r.messages[0]["content"] == "First I check."
    assert r.messages[0]["tool_calls"][0]["id"] == "call_a"
    third = turn.bodies()[2]
    assert CONTINUE_PROMPT not in contents(third)
    assert third["messages"][-2:] == r.messages[:2]


# --- empty finish -----------------------------------------------------------------------------


async def test_an_empty_finish_gets_one_nudge(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    turn = await run_turn(server, registry, [Reply(text=""), Reply(text="42.")])
    r = turn.result
    assert len(turn.requests) == 2
    assert (r.answer, r.rounds, r.stopped_by) == ("42.", 1, "answer")
    first, second = turn.bodies()
    assert EMPTY_NUDGE not in contents(first)
    assert second["messages"] == [*first["messages"], {"role": "user", "content": EMPTY_NUDGE}]
    assert r.messages == [{"role": "assistant", "content": "42."}]


async def test_a_second_empty_finish_ends_the_turn_as_empty(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    # Thinking only is still an empty answer.
    turn = await run_turn(
        server, registry, [Reply(reasoning="hmm"), Reply(text="<think>x</think>")]
    )
    r = turn.result
    assert len(turn.requests) == 2
    assert (r.answer, r.stopped_by) == ("", "empty")
    assert sum(contents(b).count(EMPTY_NUDGE) for b in turn.bodies()) == 1
    assert turn.text("thinking") == "hmmx"
    assert turn.of("content") == []


async def test_the_nudge_is_given_once_per_turn(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    turn = await run_turn(
        server,
        registry,
        [Reply(text=""), Reply(tool_calls=[calc("1", "call_a")]), Reply(text="")],
    )
    # The second empty finish is not nudged again: the turn ends as empty.
    assert len(turn.requests) == 3
    assert turn.result.stopped_by == "empty"
    assert sum(contents(b).count(EMPTY_NUDGE) for b in turn.bodies()) == 1


async def test_an_empty_reply_cut_by_length_is_nudged_not_continued(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    turn = await run_turn(
        server,
        registry,
        [Reply(reasoning="long thoughts", finish_reason="length"), Reply(text="42.")],
    )
    assert turn.result.answer == "42."
    second = turn.bodies()[1]
    assert last_user(second) == EMPTY_NUDGE
    assert CONTINUE_PROMPT not in contents(second)


# --- thinking ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["think", "thinking", "THINK"])
async def test_think_tags_become_thinking_events_even_when_split_across_chunks(
    server: FakeLLMServer, registry: ToolRegistry, tag: str
) -> None:
    chunks = ["Sure. <", tag[:2], f"{tag[2:]}>secret ", "plan</", f"{tag}>The answer", " is 42."]
    turn = await run_turn(server, registry, [Reply(chunks=chunks)])
    r = turn.result
    assert r.answer == "Sure. The answer is 42."
    assert turn.text("thinking") == "secret plan"
    assert turn.text("content") == r.answer
    assert all("secret" not in e["text"] and "<" not in e["text"] for e in turn.of("content"))
    assert r.messages == [{"role": "assistant", "content": r.answer}]


async def test_thinking_in_a_tool_round_stays_out_of_the_conversation(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    turn = await run_turn(
        server,
        registry,
        [
            Reply(
                reasoning="channel thought",
                chunks=["<think>inline", " thought</think>", "Checking."],
                tool_calls=[calc("6*7", "call_a")],
            ),
            Reply(text="<thinking>done</thinking>42."),
        ],
    )
    assert turn.text("thinking") == "channel thoughtinline thoughtdone"
    assert turn.result.answer == "42."
    assert turn.result.messages[0]["content"] == "Checking."
    dumped = json.dumps(turn.result.messages) + json.dumps(turn.bodies()[1]["messages"])
    assert "thought" not in dumped


# --- tool calls written as text ---------------------------------------------------------------


async def test_tool_call_blocks_in_content_are_hidden_and_run(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    chunks = [
        "Let me check. <tool_",
        'call>{"name": "calculate", "arguments": {"expression": "6*7"}}</tool',
        "_call>",
    ]
    turn = await run_turn(server, registry, [Reply(chunks=chunks), Reply(text="42.")])
    r = turn.result
    assert (r.answer, r.rounds) == ("42.", 2)
    assert turn.text("content") == "Let me check. 42."
    [call] = turn.executed
    assert call.id.startswith("call_text_")
    assert (call.name, json.loads(call.arguments)) == ("calculate", {"expression": "6*7"})
    assert r.messages[0] == {
        "role": "assistant",
        "content": "Let me check. ",
        "tool_calls": [call.to_message()],
    }
    assert r.messages[1] == {"role": "tool", "tool_call_id": call.id, "content": "6*7 = 42"}
    assert turn.bodies()[1]["messages"][-2:] == r.messages[:2]


async def test_dsml_markup_is_hidden_and_run(server: FakeLLMServer, registry: ToolRegistry) -> None:
    turn = await run_turn(server, registry, [Reply(text=DSML), Reply(text="42.")])
    assert turn.text("content") == "Checking.\n42."
    assert "DSML" not in json.dumps(turn.result.messages, ensure_ascii=False)
    [result] = turn.of("tool_result")
    assert (result["content"], result["is_error"]) == ("6*7 = 42", False)
    assert turn.result.answer == "42."


# --- model mistakes become readable tool results ----------------------------------------------


async def test_bad_tool_calls_become_error_results_the_model_reads(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    turn = await run_turn(
        server,
        registry,
        [
            Reply(
                tool_calls=[
                    ToolCallSpec("search_web", {"q": "x"}, id="call_unknown"),
                    ToolCallSpec("calculate", '{"expression": "1+', id="call_json"),
                    ToolCallSpec("calculate", {"expr": "1"}, id="call_args"),
                    ToolCallSpec("boom", {}, id="call_boom"),
                ]
            ),
            Reply(text="Sorry, let me answer directly: 42."),
        ],
        tools=None,
    )
    results = {e["id"]: e for e in turn.of("tool_result")}
    assert list(results) == ["call_unknown", "call_json", "call_args", "call_boom"]
    assert all(e["is_error"] for e in results.values())
    assert "Unknown tool 'search_web'" in results["call_unknown"]["content"]
    assert "not valid JSON" in results["call_json"]["content"]
    assert "field 'expression'" in results["call_args"]["content"]
    assert "RuntimeError: kaput" in results["call_boom"]["content"]
    tool_messages = [m for m in turn.bodies()[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        (i, e["content"]) for i, e in results.items()
    ]
    assert turn.result.stopped_by == "answer"


async def test_a_malformed_tool_call_block_is_an_error_result(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    turn = await run_turn(
        server,
        registry,
        [Reply(text='<tool_call>{"name": "calculate", oops}</tool_call>'), Reply(text="42.")],
    )
    [result] = turn.of("tool_result")
    assert result["is_error"] and "not valid JSON" in result["content"]
    assert turn.text("content") == "42."


async def test_an_executor_that_raises_is_an_error_result_not_a_crash(
    server: FakeLLMServer,
) -> None:
    server.extend([Reply(tool_calls=[calc("1", "call_a")]), Reply(text="ok")])
    model = make_model(provider="custom", model="fake-model", base_url=server.url, max_retries=0)
    events: list[tuple[str, dict[str, Any]]] = []

    async def execute(call: ToolCall) -> ToolResult:
        raise KeyError("no executor")

    loop = AgentLoop(
        model,
        execute,
        lambda e: events.append((e.type, e.model_dump(exclude_unset=True, exclude={"type"}))),
        tools=[{"type": "function"}],
    )
    try:
        result = await loop.run(SYSTEM, [], QUESTION)
    finally:
        await model.aclose()
    assert result.answer == "ok"
    assert result.messages[1]["tool_call_id"] == "call_a"
    assert "KeyError" in result.messages[1]["content"]
    [tool_result] = [d for k, d in events if k == "tool_result"]
    assert tool_result["is_error"]


# --- endpoints that refuse tool schemas -------------------------------------------------------


async def test_rejected_tool_schemas_resend_the_round_in_text_mode(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    call_text = '<tool_call>{"name": "calculate", "arguments": {"expression": "6*7"}}</tool_call>'
    turn = await run_turn(
        server,
        registry,
        [TOOL_REJECTION, Reply(text=f"Checking.{call_text}"), Reply(text="42.")],
    )
    r = turn.result
    assert len(turn.requests) == 3
    assert (r.answer, r.rounds) == ("42.", 2)
    assert len(turn.of("round_started")) == 2
    assert any("text tool calls" in n["text"] for n in turn.of("notice"))
    native, text1, text2 = turn.bodies()
    assert "tools" in native
    instructions = text_tool_instructions(registry.schemas(["calculate"]))
    for body in (text1, text2):
        assert "tools" not in body
        assert body["messages"][0] == {"role": "system", "content": f"{SYSTEM}\n\n{instructions}"}
    assert text1["messages"][1:] == native["messages"][1:]
    [call] = turn.executed
    # The wire speaks text; the conversation stays native.
    assert text2["messages"][2:] == [
        {"role": "assistant", "content": f"Checking.{call_text}"},
        {"role": "user", "content": f'<tool_result id="{call.id}">6*7 = 42</tool_result>'},
    ]
    assert r.messages[:2] == [
        {"role": "assistant", "content": "Checking.", "tool_calls": [call.to_message()]},
        {"role": "tool", "tool_call_id": call.id, "content": "6*7 = 42"},
    ]
    assert turn.text("content") == "Checking.42."


async def test_a_mid_turn_rejection_rewrites_earlier_native_tool_messages(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    turn = await run_turn(
        server,
        registry,
        [
            Reply(text="First.", tool_calls=[calc("6*7", "call_a"), calc("1+1", "call_b")]),
            TOOL_REJECTION,
            Reply(text="42."),
        ],
    )
    assert turn.result.answer == "42."
    body = turn.bodies()[2]
    assert "tools" not in body
    assert all(m["role"] != "tool" and "tool_calls" not in m for m in body["messages"])
    assert body["messages"][2:] == [
        {
            "role": "assistant",
            "content": 'First.<tool_call>{"name": "calculate", "arguments": {"expression": "6*7"}}'
            '</tool_call><tool_call>{"name": "calculate", "arguments": {"expression": "1+1"}}'
            "</tool_call>",
        },
        {
            "role": "user",
            "content": '<tool_result id="call_a">6*7 = 42</tool_result>\n'
            '<tool_result id="call_b">1+1 = 2</tool_result>',
        },
    ]
    # Canonical history keeps the native form and the original ids.
    assert [m.get("tool_call_id") for m in turn.result.messages[1:3]] == ["call_a", "call_b"]


async def test_text_mode_sticks_for_the_later_rounds_up_to_the_forced_finish(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    call_text = '<tool_call>{"name": "calculate", "arguments": {"expression": "1"}}</tool_call>'
    replies = [TOOL_REJECTION, *[Reply(text=call_text)] * (1 + MAX_SETTLEMENT_ROUNDS)]
    replies.append(Reply(text="Done."))
    turn = await run_turn(server, registry, replies, max_rounds=1)
    bodies = turn.bodies()
    assert len(bodies) == 1 + 1 + MAX_SETTLEMENT_ROUNDS + 1
    assert all("tools" not in b for b in bodies[1:])
    assert all("## Tools" in b["messages"][0]["content"] for b in bodies[1:-1])
    # Tools are off in the forced round, so it no longer teaches the tool syntax.
    assert "## Tools" not in bodies[-1]["messages"][0]["content"]
    assert last_user(bodies[-1]) == FORCE_PROMPT
    assert (turn.result.answer, turn.result.stopped_by) == ("Done.", "forced")
    assert len(turn.executed) == 1 + MAX_SETTLEMENT_ROUNDS


# --- stop_turn --------------------------------------------------------------------------------


async def test_a_stop_turn_result_ends_the_turn_after_that_result(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    turn = await run_turn(
        server,
        registry,
        [
            Reply(
                text="One question first.",
                tool_calls=[
                    ToolCallSpec("stop_here", {}, id="call_stop"),
                    calc("6*7", "call_after"),
                ],
            )
        ],
        tools=None,
    )
    r = turn.result
    assert len(turn.requests) == 1
    assert (r.stopped_by, r.rounds, r.answer) == ("tool", 1, "")
    assert [c.id for c in turn.executed] == ["call_stop"]
    assert turn.kinds()[-2:] == ["tool_call", "tool_result"]
    assert [e["id"] for e in turn.of("tool_result")] == ["call_stop"]
    # Every tool call in the history has a result, or the next turn's request is invalid.
    assert r.messages[0]["tool_calls"][1]["id"] == "call_after"
    assert r.messages[1] == {
        "role": "tool",
        "tool_call_id": "call_stop",
        "content": "The learner cancelled.",
    }
    assert r.messages[2]["tool_call_id"] == "call_after"
    assert len(r.messages) == 3


async def test_usage_is_not_carried_into_the_next_run(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    server.extend(
        [
            Reply(text="a", usage={"prompt_tokens": 3, "completion_tokens": 1}),
            Reply(text="b", usage={"prompt_tokens": 5, "completion_tokens": 2}),
        ]
    )
    model = make_model(provider="custom", model="fake-model", base_url=server.url, max_retries=0)
    loop = AgentLoop(model, registry_executor(registry), lambda kind, **d: None)
    try:
        await loop.run(SYSTEM, [], QUESTION)
        second = await loop.run(SYSTEM, [], QUESTION)
    finally:
        await model.aclose()
    assert (second.usage.prompt_tokens, second.usage.completion_tokens) == (5, 2)


def registry_executor(registry: ToolRegistry) -> Any:
    ctx = ToolContext(session_id="s", turn_id="t", workspace=Path("."))

    async def execute(call: ToolCall) -> ToolResult:
        return await registry.execute(call, ctx)

    return execute


async def test_the_default_budget_is_eight_exploration_rounds(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    tool_rounds = 8 + MAX_SETTLEMENT_ROUNDS
    replies = [Reply(tool_calls=[calc("1", f"call_{i}")]) for i in range(tool_rounds)]
    server.extend([*replies, Reply(text="Done.")])
    model = make_model(provider="custom", model="fake-model", base_url=server.url, max_retries=0)
    loop = AgentLoop(
        model, registry_executor(registry), lambda kind, **d: None, tools=registry.schemas()
    )
    try:
        result = await loop.run(SYSTEM, [], QUESTION)
    finally:
        await model.aclose()
    assert len(server.requests) == tool_rounds + 1
    assert (result.rounds, result.stopped_by) == (12, "forced")
    assert [last_user(r.body) == SETTLE_PROMPT for r in server.requests].count(True) == 3


# retries on the status line, the turn deadline -------------------------------------------------
async def test_a_retry_wait_becomes_a_notice_with_its_countdown(server: FakeLLMServer) -> None:
    server.extend([Reply(status=429, headers={"Retry-After": "0.2"}), Reply(text="ok")])
    model = make_model(provider="custom", model="fake-model", base_url=server.url)
    events: list[tuple[str, dict[str, Any]]] = []

    async def execute(call: ToolCall) -> ToolResult:
        raise AssertionError("no tool runs")

    loop = AgentLoop(
        model,
        execute,
        lambda e: events.append((e.type, e.model_dump(exclude_unset=True, exclude={"type"}))),
    )
    try:
        result = await loop.run(SYSTEM, [], QUESTION)
    finally:
        await model.aclose()
    assert result.answer == "ok"
    notices = [d for kind, d in events if kind == "notice"]
    assert notices == [
        {
            "text": "rate limited by OpenAI-compatible server, retrying in 1 s",
            "retry_in": 0.2,
            "reason": "rate limited by OpenAI-compatible server",
            "status": 429,
        }
    ]


class SlowTool(Tool):
    name: ClassVar[str] = "slow"
    description: ClassVar[str] = "Takes its time."
    Args: ClassVar[type[BaseModel]] = NoArgs

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        import asyncio

        await asyncio.sleep(30)
        return ToolResult(content="late")


async def test_the_turn_deadline_ends_a_turn_with_an_error_in_words(
    server: FakeLLMServer, registry: ToolRegistry
) -> None:
    from deeptutor_jupyter.agent.loop import TurnDeadline

    registry.register(SlowTool())
    server.add(Reply(tool_calls=[ToolCallSpec("slow", {}, id="s1")]))
    model = make_model(
        provider="custom", model="fake-model", base_url=server.url, turn_deadline=0.5
    )
    ctx = ToolContext(session_id="s", turn_id="t", workspace=Path("."))

    async def execute(call: ToolCall) -> ToolResult:
        return await registry.execute(call, ctx)

    loop = AgentLoop(model, execute, lambda kind, **data: None, tools=registry.schemas(["slow"]))
    try:
        with pytest.raises(TurnDeadline) as info:
            await loop.run(SYSTEM, [], QUESTION)
    finally:
        await model.aclose()
    assert info.value.kind == "timeout"
    assert "time limit (0.5 s of model and tool time)" in info.value.message
    assert "turn_deadline" in info.value.hint
