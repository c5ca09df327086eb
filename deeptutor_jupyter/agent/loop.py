"""The chat loop: a round with tool calls is narration, a round without is the answer.

Rules (docs/architecture.md): an exploration budget of rounds, then up to three settlement rounds
that ask the model to wrap up, then one forced finish with tools off. A reply cut by a length
limit is continued without repeating; an empty finish gets one nudge. Thinking tags and tool calls
written as text never reach the visible answer.

The canonical conversation is kept in native OpenAI form (assistant ``tool_calls`` + ``tool``
messages) whatever the endpoint speaks; text tool-call mode is a translation at the wire, so a
session can degrade mid-way and its stored history stays valid for any provider.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from deeptutor_jupyter.agent.events import (
    Content,
    Emit,
    Notice,
    RoundStarted,
    Thinking,
    ToolCallFinished,
    ToolCallStarted,
)
from deeptutor_jupyter.agent.text_tools import TextToolCallFilter, text_tool_instructions
from deeptutor_jupyter.agent.think import ThinkTagFilter
from deeptutor_jupyter.providers.base import (
    ChatModel,
    ChatRequest,
    Message,
    ProviderError,
    RoundEnd,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolsUnsupportedError,
    Usage,
    Waiting,
)
from deeptutor_jupyter.tools.base import ToolResult

LENGTH_REASONS = frozenset({"length", "max_tokens", "max_output_tokens"})
MAX_SETTLEMENT_ROUNDS = 3
MAX_CONTINUATIONS = 3
# Tool calls one model message may ask for (settings ``max_tool_calls``). A model that writes
# thousands would otherwise run them all and the cell would build a card for each.
MAX_TOOL_CALLS = 32
# Characters of text and thinking one round may stream: above a 5 MB answer, which must still
# arrive whole (tests/e2e/test_faults.py), and far beyond any model's output limit. A server that
# streams without end is cut here: each character is kept in the events, the history and the
# saved answer, so 30 MB would grow state.db by hundreds of MB.
MAX_ROUND_CHARS = 8_000_000

CONTINUE_PROMPT = (
    "Your reply was cut off by the length limit. Continue exactly where it stopped, "
    "without repeating anything already written."
)
EMPTY_NUDGE = "Your reply was empty. Please give your answer to the question above."
SETTLE_PROMPT = (
    "You have used the tool budget for this question. Answer now with what you have; "
    "call a tool only if it is indispensable."
)
FORCE_PROMPT = "Answer now, in full, with what you have. Tools are no longer available."
SKIPPED = "Not run: the turn ended before this tool call."
ROUND_CUT = "\n\n[Cut: this reply reached the limit of {limit:,} characters per round.]"
NO_ANSWER = "[No answer was given.]"


def too_many_calls(asked: int, limit: int) -> str:
    """The one tool result a message with too many calls gets, in place of the calls beyond it."""
    return (
        f"Refused: this message asked for {asked} tool calls, and the limit is {limit} per "
        f"message (setting max_tool_calls). The first {limit} ran; the other {asked - limit} "
        "did not run. Ask for fewer tools at a time."
    )


Phase = Literal["exploration", "settlement", "forced"]


class TurnDeadline(ProviderError):
    """The turn used up its ``turn_deadline``; it ends with an error card, like a provider's."""


ExecuteTool = Callable[[ToolCall], Awaitable[ToolResult]]


@dataclass
class LoopResult:
    answer: str
    messages: list[Message]  # what this turn adds to the conversation after the user message
    rounds: int
    usage: Usage
    stopped_by: Literal["answer", "forced", "empty", "tool"]


@dataclass
class _Round:
    visible: str
    end: RoundEnd
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass
class LoopState:
    """Where a turn stands, in plain JSON values, so another process can continue it.

    While a tool runs, ``current_call`` is that call and ``pending_calls`` the calls of the same
    round still to run; a turn paused on ``ask_user`` is saved at exactly that point.
    """

    system: str
    base: list[Message]  # history + the question
    added: list[Message] = field(default_factory=list)
    rounds: int = 0
    prefix: str = ""  # visible answer kept across length continuations
    continuations: int = 0
    nudged: bool = False
    nudge_now: bool = False
    current_call: dict[str, str] | None = None
    pending_calls: list[dict[str, str]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LoopState:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def _call_json(call: ToolCall) -> dict[str, str]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def _call_of(data: dict[str, str]) -> ToolCall:
    return ToolCall(data["id"], data["name"], data["arguments"])


class AgentLoop:
    def __init__(
        self,
        model: ChatModel,
        execute_tool: ExecuteTool,
        emit: Emit,
        *,
        tools: Sequence[dict[str, Any]] = (),
        max_rounds: int = 8,
        max_tokens: int | None = None,
        temperature: float | None = None,
        max_tool_calls: int = MAX_TOOL_CALLS,
        max_round_chars: int = MAX_ROUND_CHARS,
    ) -> None:
        self.model = model
        self.execute_tool = execute_tool
        self.emit = emit
        self.tools = list(tools)
        self.max_rounds = max(1, max_rounds)
        self.max_tool_calls = max(1, max_tool_calls)
        self.max_round_chars = max(1, max_round_chars)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.state = LoopState(system="", base=[])
        # Model and tool time this turn has used, against the model's ``turn_deadline``.
        self._spent = 0.0

    @property
    def usage(self) -> Usage:
        return Usage(self.state.prompt_tokens, self.state.completion_tokens)

    async def run(self, system: str, history: list[Message], question: Message) -> LoopResult:
        self.state = LoopState(system=system, base=[*history, question])
        return await self._drive()

    async def resume(self, state: LoopState, outcome: ToolResult) -> LoopResult:
        """Continue a turn saved while ``state.current_call`` ran, with that call's result."""
        self.state = state
        call = state.current_call
        if call is None:
            raise ValueError("This saved turn was not waiting for a tool result.")
        rest = [_call_of(c) for c in state.pending_calls]
        if self._record(_call_of(call), outcome, rest):
            return self._result("", "tool")
        if await self._run_calls(rest):
            return self._result("", "tool")
        return await self._drive()

    async def _drive(self) -> LoopResult:
        st = self.state
        while True:
            st.rounds += 1
            phase = self._phase(st.rounds)
            tools_on = bool(self.tools) and phase != "forced"
            transient = self._transient(phase, st.prefix, st.nudge_now)
            st.nudge_now = False
            self.emit(RoundStarted(round=st.rounds, phase=phase))
            result = await self._within_deadline(
                self._round(st.system, [*st.base, *st.added, *transient], tools_on)
            )
            if result.tool_calls and tools_on:
                calls, refused = self._capped(result.tool_calls)
                # A cut reply that went on to call tools was narration after all: the prefix
                # joins this message, and the next round is a fresh one, not a continuation.
                st.added.append(_assistant(st.prefix + result.visible, calls))
                st.prefix = ""
                if refused:
                    self._refuse(calls[0], len(result.tool_calls))
                    calls = calls[1:]
                if await self._run_calls(calls):
                    return self._result("", "tool")
                continue
            answer = st.prefix + result.visible
            # An empty cut (all tokens spent thinking) has nothing to continue: it is nudged.
            cut = result.end.finish_reason in LENGTH_REASONS and bool(answer.strip())
            if cut and st.continuations < MAX_CONTINUATIONS:
                st.continuations += 1
                st.prefix = answer
                self.emit(Notice(text="The answer hit the length limit; asking to continue."))
                st.rounds -= 1  # a continuation is the same round, not a new exploration step
                continue
            if not answer.strip() and not st.nudged:
                st.nudged = st.nudge_now = True
                st.rounds -= 1
                continue
            # Some providers reject an empty assistant message in a later request.
            st.added.append({"role": "assistant", "content": answer or NO_ANSWER})
            stopped: Literal["answer", "forced", "empty"] = (
                "empty" if not answer.strip() else "forced" if phase == "forced" else "answer"
            )
            return self._result(answer, stopped)

    def _capped(self, calls: Sequence[ToolCall]) -> tuple[list[ToolCall], bool]:
        """The calls kept from one message, and whether some were refused.

        Beyond the cap, the first call over it stays in the message, moved first, to carry the
        one refusal; the rest are dropped from the stored message, so the history the model sees
        next has a result for every call it keeps and nothing else.
        """
        if len(calls) <= self.max_tool_calls:
            return list(calls), False
        return [calls[self.max_tool_calls], *calls[: self.max_tool_calls]], True

    def _refuse(self, carrier: ToolCall, asked: int) -> None:
        """One card and one tool result saying the limit, before the kept calls run."""
        self.emit(ToolCallStarted(id=carrier.id, name=carrier.name, arguments=carrier.arguments))
        refusal = too_many_calls(asked, self.max_tool_calls)
        self._record(carrier, ToolResult(content=refusal, is_error=True, summary=refusal), ())

    async def _run_calls(self, calls: Sequence[ToolCall]) -> bool:
        """Run a round's calls in order; True when one of them ended the turn."""
        calls = list(calls)
        for index, call in enumerate(calls):
            rest = calls[index + 1 :]
            self.state.current_call = _call_json(call)
            self.state.pending_calls = [_call_json(c) for c in rest]
            self.emit(ToolCallStarted(id=call.id, name=call.name, arguments=call.arguments))
            outcome = await self._execute(call)
            if self._record(call, outcome, rest):
                return True
        return False

    def _record(self, call: ToolCall, outcome: ToolResult, rest: Sequence[ToolCall]) -> bool:
        self.state.current_call = None
        self.state.pending_calls = []
        self.emit(
            ToolCallFinished(
                id=call.id,
                name=call.name,
                content=outcome.content,
                is_error=outcome.is_error,
                summary=outcome.summary,
                data=outcome.data or {},
            )
        )
        added = self.state.added
        added.append({"role": "tool", "tool_call_id": call.id, "content": outcome.content})
        if not outcome.stop_turn:
            return False
        # Every tool call needs a result or the stored history is invalid for the next turn's
        # request; the calls after this one never ran.
        added += [{"role": "tool", "tool_call_id": c.id, "content": SKIPPED} for c in rest]
        return True

    def _phase(self, rounds: int) -> Phase:
        if rounds <= self.max_rounds:
            return "exploration"
        if rounds <= self.max_rounds + MAX_SETTLEMENT_ROUNDS:
            return "settlement"
        return "forced"

    def _transient(self, phase: Phase, prefix: str, nudge: bool) -> list[Message]:
        """Messages sent this round only: they steer the model but are not the conversation.

        The phase prompt comes first: the cut prefix (or the empty reply) answered it, so the
        request replays what the model saw and then asks it to go on.
        """
        extra: list[Message] = []
        if phase == "settlement":
            extra.append({"role": "user", "content": SETTLE_PROMPT})
        elif phase == "forced":
            extra.append({"role": "user", "content": FORCE_PROMPT})
        if prefix:
            extra += [
                {"role": "assistant", "content": prefix},
                {"role": "user", "content": CONTINUE_PROMPT},
            ]
        elif nudge:
            extra.append({"role": "user", "content": EMPTY_NUDGE})
        return extra

    async def _within_deadline(self, step: Awaitable[Any]) -> Any:
        """Await one step of the turn, ending the turn when its ``turn_deadline`` is used up.

        Only model and tool time counts: a question waiting for the learner's answer is not
        the tutor being slow. The deadline comes with the model (config ``turn_deadline``).
        """
        deadline = getattr(self.model, "turn_deadline", None)
        if not deadline:
            return await step
        started = time.monotonic()
        limit = asyncio.timeout(max(deadline - self._spent, 0.0))
        try:
            async with limit:
                return await step
        except TimeoutError:
            if not limit.expired():
                raise
            raise TurnDeadline(
                "timeout",
                f"This turn used its whole time limit ({deadline:g} s of model and tool time) "
                "without finishing, so it was stopped.",
                hint="Ask a smaller question, or raise turn_deadline "
                "(DEEPTUTOR_TURN_DEADLINE or settings.toml).",
            ) from None
        finally:
            self._spent += time.monotonic() - started

    async def _execute(self, call: ToolCall) -> ToolResult:
        """The executor's result; an executor that raises is one more error the model reads."""
        try:
            if call.name == "ask_user":  # the learner's time, not the tutor's
                return await self.execute_tool(call)
            result: ToolResult = await self._within_deadline(self.execute_tool(call))
            return result
        except TurnDeadline:
            raise
        except Exception as exc:  # CancelledError is a BaseException and still stops the turn.
            message = f"Tool {call.name!r} could not run: {type(exc).__name__}: {exc}"
            return ToolResult(content=message, is_error=True, summary=message)

    def _result(
        self, answer: str, stopped: Literal["answer", "forced", "empty", "tool"]
    ) -> LoopResult:
        st = self.state
        return LoopResult(answer, st.added, st.rounds, self.usage, stopped)

    async def _round(self, system: str, messages: list[Message], tools_on: bool) -> _Round:
        try:
            return await self._stream_round(system, messages, tools_on)
        except ToolsUnsupportedError:
            # The provider has turned compat.native_tools off; saying so here as well keeps
            # the retry from looping on a provider that forgot. Later rounds stay in text mode.
            self.model.compat.native_tools = False
            self.emit(Notice(text="This endpoint refused tool schemas; using text tool calls."))
            return await self._stream_round(system, messages, tools_on)

    async def _stream_round(self, system: str, messages: list[Message], tools_on: bool) -> _Round:
        native = self.model.compat.native_tools
        request = ChatRequest(
            model=self.model.model,
            messages=self._wire(system, messages, tools_on, native),
            tools=self.tools if tools_on and native else None,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
        )
        think = ThinkTagFilter()
        hide = TextToolCallFilter()
        visible: list[str] = []
        end = RoundEnd(finish_reason=None)
        room = self.max_round_chars
        cut = False

        def within(text: str) -> str:
            """What of ``text`` fits the round's limit (``cut`` once something did not)."""
            nonlocal room, cut
            if len(text) > room:
                text, cut = text[:room], True
            room -= len(text)
            return text

        def show(pieces: Sequence[tuple[str, str]]) -> None:
            for kind, piece in pieces:
                if kind == "thinking":
                    if shown := within(piece):
                        self.emit(Thinking(text=shown))
                    continue
                # Markup is hidden even with tools off (forced round): it is never an answer.
                text = within(hide.feed(piece))
                if text:
                    visible.append(text)
                    self.emit(Content(text=text))

        stream = self.model.stream(request)
        try:
            async for event in stream:
                if isinstance(event, TextDelta):
                    show(think.feed(event.text))
                elif isinstance(event, ThinkingDelta):
                    if shown := within(event.text):
                        self.emit(Thinking(text=shown))
                elif isinstance(event, Waiting):
                    text = f"{event.reason}, retrying in {math.ceil(event.seconds)} s"
                    self.emit(
                        Notice(
                            text=text,
                            retry_in=event.seconds,
                            reason=event.reason,
                            status=event.status,
                        )
                    )
                else:
                    end = event
                if cut:
                    break
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()  # hang up now: the rest of a cut reply is never read
        if not cut:
            show(think.flush())
            tail = within(hide.flush())
            if tail:
                visible.append(tail)
                self.emit(Content(text=tail))
        if cut:
            # Said in the answer itself: it is what is stored and shown, and the model reads it.
            note = ROUND_CUT.format(limit=self.max_round_chars)
            visible.append(note)
            self.emit(Content(text=note))
            return _Round("".join(visible), RoundEnd(finish_reason="cut"), [])
        if end.usage is not None:
            self.state.prompt_tokens += end.usage.prompt_tokens
            self.state.completion_tokens += end.usage.completion_tokens
        # Native calls win; otherwise the calls the filter found while hiding their markup.
        calls = list(end.tool_calls) or hide.calls
        return _Round("".join(visible), end, calls)

    def _wire(
        self, system: str, messages: list[Message], tools_on: bool, native: bool
    ) -> list[Message]:
        if not native and tools_on:
            system = f"{system}\n\n{text_tool_instructions(self.tools)}".strip()
        wire: list[Message] = [{"role": "system", "content": system}] if system else []
        if native and tools_on:
            return wire + messages
        # Without tool definitions in the request (text mode, or the forced round) some
        # providers reject native tool messages (Anthropic does), so they travel as text.
        return wire + _as_text_protocol(messages)


def _assistant(visible: str, calls: list[ToolCall]) -> Message:
    return {
        "role": "assistant",
        "content": visible or None,
        "tool_calls": [c.to_message() for c in calls],
    }


def _as_text_protocol(messages: list[Message]) -> list[Message]:
    """Native tool messages rewritten for an endpoint without function calling."""
    out: list[Message] = []
    merged: set[int] = set()  # indexes of user messages made of tool results
    for m in messages:
        if m.get("role") == "assistant" and m.get("tool_calls"):
            blocks = "".join(
                "<tool_call>"
                + json.dumps(
                    {
                        "name": c["function"]["name"],
                        "arguments": _loads(c["function"]["arguments"]),
                    },
                    ensure_ascii=False,
                )
                + "</tool_call>"
                for c in m["tool_calls"]
            )
            out.append({"role": "assistant", "content": f"{m.get('content') or ''}{blocks}"})
        elif m.get("role") == "tool":
            call_id, content = m.get("tool_call_id", ""), m.get("content", "")
            block = f'<tool_result id="{call_id}">{content}</tool_result>'
            if out and len(out) - 1 in merged:
                out[-1]["content"] = f"{out[-1].get('content') or ''}\n{block}"
            else:
                merged.add(len(out))
                out.append({"role": "user", "content": block})
        else:
            out.append(m)
    return out


def _loads(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments
