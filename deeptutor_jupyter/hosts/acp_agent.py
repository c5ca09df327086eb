"""``deeptutor-jupyter acp``: the tutor as an ACP agent (agent-client-protocol), for jupyter-ai 3
and other ACP hosts.

A prompt is a turn of the one ``TutorSession`` (through ``TutorHost``); its events stream to the
host as they happen: the answer and thinking as message chunks, each tool call as a tool call
with its update. When the tutor asks the learner (``ask_user``), the host's structured questions
answer it: an elicitation form where the host has them (hosts/forms.py), else a permission
request whose options are the choices (single choice), else the question is said in the chat and
the learner's next prompt answers it. An ACP session is a conversation of the tutor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, Literal, cast

import acp
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    ClientCapabilities,
    ElicitationFormSessionMode,
    ElicitationSchema,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
    ToolKind,
)

from deeptutor_jupyter.hosts.forms import form_of, submission_of
from deeptutor_jupyter.hosts.tutor_host import HostError, Settled, TutorHost
from deeptutor_jupyter.tools.mcp.connection import ALLOW, DENY

PermissionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]

CHOICES = ("single", "multiple", "toggle")


class TutorAgent:
    """The ``acp.Agent`` methods the tutor serves; the others are the library's defaults."""

    def __init__(self, host: TutorHost | None = None) -> None:
        self.host = host or TutorHost(surface="acp")
        self.client: Any = None
        self.caps: ClientCapabilities | None = None

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        self.caps = client_capabilities
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="deeptutor", title="DeepTutor", version="0"),
        )

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        session = self.host.session
        session.open(session.resolve({}))
        return NewSessionResponse(session_id=session.new_conversation())

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        for turn in list(self.host.turns.values()):
            if turn.ctx.session_id == session_id:
                self.host.session.stop(turn.turn_id, "Stopped by the host.")

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "\n".join(b.text for b in prompt if getattr(b, "type", "") == "text").strip()
        session = self.host.session
        session.open(session.resolve({}))
        if session.session_id != session_id and not session.switch(session_id):
            raise acp.RequestError.invalid_params({"session_id": "unknown session"})
        waiting = self._waiting(session_id)
        if waiting is not None:  # the question was said in the chat: this prompt answers it
            return await self._reply_in_chat(session_id, waiting, text)
        try:
            settled = await self._run(session_id, self.host.ask(text))
        except HostError as exc:
            await self._say(session_id, f"⚠ {exc}")
            return PromptResponse(stop_reason="end_turn")
        return await self._follow(session_id, settled)

    # running a turn and showing it ---------------------------------------------------------
    async def _run(self, session_id: str, step: Awaitable[Settled]) -> Settled:
        """Run a step of a turn (ask or answer), streaming its new events to the host; the step
        starts only when awaited here, after the forwarding is in place."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        sender = asyncio.get_running_loop().create_task(self._send(session_id, queue))

        def forward(event: Any) -> None:
            queue.put_nowait(event.body)

        self.host.on_event = forward
        try:
            settled = await step
        finally:
            self.host.on_event = None
            queue.put_nowait(None)
            await sender
        return settled

    async def _send(self, session_id: str, queue: asyncio.Queue[Any]) -> None:
        from deeptutor_jupyter.agent.events import (
            Content,
            Thinking,
            ToolCallFinished,
            ToolCallStarted,
        )

        while (body := await queue.get()) is not None:
            update: Any = None
            match body:
                case Content(text=text, explore=False):
                    update = acp.update_agent_message_text(text)
                case Thinking(text=text):
                    update = acp.update_agent_thought_text(text)
                case ToolCallStarted(id=call_id, name=name, arguments=arguments):
                    update = acp.start_tool_call(
                        call_id, name, kind=_kind(name), status="in_progress", raw_input=arguments
                    )
                case ToolCallFinished(id=call_id, content=content, is_error=failed):
                    update = acp.update_tool_call(
                        call_id,
                        status="failed" if failed else "completed",
                        content=[acp.tool_content(acp.text_block(content))],
                    )
            if update is not None:
                await self.client.session_update(session_id=session_id, update=update)

    async def _follow(self, session_id: str, settled: Settled) -> PromptResponse:
        """Answer the turn's questions through the host until it ends, or say it in the chat."""
        while settled.waiting is not None:
            row = settled.waiting
            if row.kind != "ask_user":
                await self._say(session_id, _quiz_text(row))
                return PromptResponse(stop_reason="end_turn")
            answer = await self._ask_host(session_id, row)
            if answer is None:
                await self._say(session_id, _question_text(row.payload))
                return PromptResponse(stop_reason="end_turn")
            selections, custom, cancelled = answer
            step = self._answer(row.request_id, selections, custom, cancelled)
            settled = await self._run(session_id, step)
        if settled.error:
            await self._say(session_id, f"⚠ {settled.error}")
        stop = "cancelled" if settled.turn.status == "cancelled" else "end_turn"
        return PromptResponse(stop_reason=stop)

    async def _answer(
        self, request_id: str, selections: list[str], text: str, cancelled: bool
    ) -> Settled:
        settled = await self.host.answer(request_id, selections, text, cancelled)
        if settled is None:
            raise HostError("The turn of this question does not run here.")
        return settled

    async def _ask_host(self, session_id: str, row: Any) -> tuple[list[str], str, bool] | None:
        """The learner's answer through the host's structured questions, or None."""
        payload = row.payload
        ids = [o["id"] for o in payload.get("options", [])]
        if ids == [ALLOW, DENY]:  # a server's call waiting for approval: the host's own prompt
            return await self._permission(
                session_id, row, {ALLOW: "allow_once", DENY: "reject_once"}
            )
        elicitation = self.caps.elicitation if self.caps is not None else None
        if elicitation is not None and elicitation.form is not None:
            answer = await self._form(session_id, row)
            if answer is not None:
                return answer
        if payload.get("mode") == "single" and not payload.get("allow_custom"):
            return await self._permission(session_id, row, {})
        return None

    async def _permission(
        self, session_id: str, row: Any, kinds: dict[str, PermissionKind]
    ) -> tuple[list[str], str, bool]:
        """A single choice as the host's permission request (its options, in order)."""
        payload = row.payload
        options = [
            PermissionOption(
                option_id=o["id"], name=o["label"], kind=kinds.get(o["id"], "allow_once")
            )
            for o in payload["options"]
        ]
        call = ToolCallUpdate(tool_call_id=row.tool_call_id, title=payload["title"])
        response = await self.client.request_permission(
            session_id=session_id, tool_call=call, options=options
        )
        outcome = response.outcome
        if isinstance(outcome, AllowedOutcome):
            return [outcome.option_id], "", False
        return [], "", True

    async def _form(self, session_id: str, row: Any) -> tuple[list[str], str, bool] | None:
        """An elicitation form (unstable in ACP 0.12: a host that refuses it gets the next way)."""
        message, schema = form_of(row.payload)
        mode = ElicitationFormSessionMode(
            session_id=session_id,
            tool_call_id=row.tool_call_id,
            requested_schema=ElicitationSchema.model_validate(schema),
        )
        try:
            response = await self.client.create_elicitation(message=message, mode=mode)
        except acp.RequestError:
            return None
        if response.action != "accept":
            return [], "", True
        selections, custom = submission_of(row.payload, response.content)
        return selections, custom, False

    async def _reply_in_chat(self, session_id: str, row: Any, text: str) -> PromptResponse:
        selections, custom = _typed_answer(row.payload, text)
        try:
            settled = await self._run(
                session_id, self._answer(row.request_id, selections, custom, False)
            )
        except Exception as exc:  # a refused answer says why; the question still waits
            await self._say(session_id, f"⚠ {exc}")
            return PromptResponse(stop_reason="end_turn")
        return await self._follow(session_id, settled)

    def _waiting(self, session_id: str) -> Any:
        rows = self.host.session.pending(session_id=session_id)
        return next((r for r in rows if r.turn_id in self.host.turns), None)

    async def _say(self, session_id: str, text: str) -> None:
        await self.client.session_update(
            session_id=session_id, update=acp.update_agent_message_text(text)
        )


def _kind(name: str) -> ToolKind:
    if name in ("search_knowledge", "read_memory", "read_skill", "read_notebook"):
        return "search" if name == "search_knowledge" else "read"
    if name in ("calculate",):
        return "execute"
    return "other"


def _typed_answer(payload: dict[str, Any], text: str) -> tuple[list[str], str]:
    """A chat reply as an answer: option ids or labels for a choice, else the text itself."""
    if payload.get("mode") not in CHOICES:
        return [], text.strip()
    by_name = {}
    for option in payload.get("options", []):
        by_name[option["id"].lower()] = option["id"]
        by_name[option["label"].lower()] = option["id"]
    picked = [by_name[p.strip().lower()] for p in text.split(",") if p.strip().lower() in by_name]
    return (picked, "") if picked else ([], text.strip())


def _question_text(payload: dict[str, Any]) -> str:
    lines = [f"**The tutor asks:** {payload.get('title')}"]
    if payload.get("description"):
        lines.append(payload["description"])
    lines += [f"- `{o['id']}`: {o['label']}" for o in payload.get("options", [])]
    lines.append("Reply with your answer" + (" (an option)." if payload.get("options") else "."))
    return "\n".join(lines)


def _quiz_text(row: Any) -> str:
    return (
        f"**The tutor gave a quiz:** {row.payload.get('title', '')}. Answer it in the notebook or "
        f"with the MCP tool answer_quiz (quiz id `{row.request_id}`)."
    )


def serve() -> None:
    """Run the agent on stdin/stdout until the host hangs up."""
    # Elicitation is part of ACP's unstable protocol in 0.12; hosts without it are not asked.
    # TutorAgent serves the methods a tutor needs; the library answers the others as unknown.
    agent = cast("acp.Agent", TutorAgent())
    asyncio.run(acp.run_agent(agent, use_unstable_protocol=True))
