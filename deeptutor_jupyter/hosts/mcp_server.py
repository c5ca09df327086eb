"""``deeptutor-jupyter mcp``: the tutor as an MCP server (stdio or streamable HTTP).

Its tools drive one ``TutorSession`` through ``TutorHost``: ``ask`` (with the learner's memory
and knowledge bases), ``search_knowledge``, ``pending``, ``answer``, ``quiz`` and
``answer_quiz``. When the tutor asks the learner (``ask_user``), a client that can show forms
gets an MCP elicitation (hosts/forms.py); any other client gets a tool result saying the tutor is
waiting for the learner, with the request id to ``answer``.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

# Imported at module level: the SDK reads the tools' annotations (Context, InputRequiredResult)
# from this module's globals. Only ``deeptutor-jupyter mcp`` imports this module.
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult
from mcp_types.version import is_version_at_least

from deeptutor_jupyter.hosts.forms import form_of, submission_of
from deeptutor_jupyter.hosts.tutor_host import HostError, Settled, TutorHost

QUIZ_PROMPT = (
    "Give me a short quiz of {n} questions on: {topic}. Use the make_quiz tool, then tell me "
    "how I did."
)


def build_server(host: TutorHost) -> MCPServer:
    server = MCPServer(
        "deeptutor",
        instructions=(
            "DeepTutor, a patient tutor with the learner's memory and course material. Ask it "
            "with `ask`. When it waits for the learner, answer with `answer` (or `answer_quiz`)."
        ),
    )

    @server.tool()
    async def ask(
        question: str,
        ctx: Context,
        knowledge_bases: list[str] | None = None,
        new_conversation: bool = False,
    ) -> str | InputRequiredResult:
        """Ask the tutor; it answers with the learner's memory and the named knowledge bases."""
        if ctx.input_responses:
            return await _answered(host, ctx)
        try:
            settled = await host.ask(question, knowledge_bases, new_conversation)
        except HostError as exc:
            return f"Error: {exc}"
        return await _reply(host, settled, ctx)

    @server.tool()
    async def answer(
        request_id: str,
        ctx: Context,
        selections: list[str] | None = None,
        text: str = "",
        cancel: bool = False,
    ) -> str | InputRequiredResult:
        """Answer a question the tutor is waiting on: option ids in selections, or text."""
        if ctx.input_responses:
            return await _answered(host, ctx)
        try:
            settled = await host.answer(request_id, selections, text, cancel)
        except Exception as exc:  # refused answers say why (InteractionError, HostError)
            return f"Error: {exc}"
        if settled is None:
            return "Answered; the turn goes on where it was asked."
        return await _reply(host, settled, ctx)

    @server.tool()
    async def pending() -> str:
        """What the tutor waits on: questions and quizzes, with their ids."""
        rows = host.pending()
        if not rows:
            return "Nothing is waiting."
        return "\n\n".join(_describe(row) for row in rows)

    @server.tool()
    async def search_knowledge(knowledge_base: str, query: str) -> str:
        """Search one of the learner's knowledge bases; numbered passages with their source."""
        try:
            return await host.search(knowledge_base, query)
        except HostError as exc:
            return f"Error: {exc}"

    @server.tool()
    async def quiz(topic: str, ctx: Context, questions: int = 3) -> str | InputRequiredResult:
        """Have the tutor quiz the learner on a topic; answer it with answer_quiz."""
        prompt = QUIZ_PROMPT.format(n=max(1, min(questions, 10)), topic=topic)
        try:
            settled = await host.ask(prompt)
        except HostError as exc:
            return f"Error: {exc}"
        return await _reply(host, settled, ctx)

    @server.tool()
    async def answer_quiz(
        quiz_id: str, answers: dict[str, Any], ctx: Context
    ) -> str | InputRequiredResult:
        """Answer a waiting quiz: {question id: [option ids] for a choice, a number, or text}."""
        try:
            settled = await host.answer_quiz(quiz_id, answers)
        except Exception as exc:  # refused answers say why
            return f"Error: {exc}"
        if settled is None:
            return "Answered; the turn goes on where the quiz was given."
        return await _reply(host, settled, ctx)

    return server


async def _reply(host: TutorHost, settled: Settled, ctx: Context) -> str | InputRequiredResult:
    """The tool result for where a turn stands; a question becomes a form where the client
    can show one (elicitation), else a "waiting for the learner" result."""
    while settled.waiting is not None and settled.waiting.kind == "ask_user" and _forms(ctx):
        row = settled.waiting
        if _modern(ctx):
            return _input_required(row)
        message, schema = form_of(row.payload)  # an older client: ask it mid-call
        result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
        settled = await _submit(host, row, result.action, result.content)
    return _text(settled)


def _input_required(row: Any) -> InputRequiredResult:
    message, schema = form_of(row.payload)
    request = ElicitRequest(
        params=ElicitRequestFormParams(message=message, requested_schema=schema)
    )
    state = json.dumps({"request_id": row.request_id, "turn_id": row.turn_id})
    return InputRequiredResult(input_requests={row.request_id: request}, request_state=state)


async def _answered(host: TutorHost, ctx: Context) -> str | InputRequiredResult:
    """The client's retry with the learner's form: submit it, go on with the turn."""
    state = json.loads(ctx.request_state or "{}")
    row = host.row(state.get("request_id", ""))
    response = (ctx.input_responses or {}).get(row.request_id)
    settled = await _submit(
        host, row, getattr(response, "action", "cancel"), getattr(response, "content", None)
    )
    return await _reply(host, settled, ctx)


async def _submit(host: TutorHost, row: Any, action: str, content: Any) -> Settled:
    selections, text = submission_of(row.payload, content)
    settled = await host.answer(row.request_id, selections, text, cancelled=action != "accept")
    if settled is None:
        raise HostError("The turn of this question does not run here.")
    return settled


def _forms(ctx: Context) -> bool:
    caps = ctx.client_capabilities
    return caps is not None and caps.elicitation is not None


def _modern(ctx: Context) -> bool:
    version = ctx.protocol_version
    return version is not None and is_version_at_least(version, "2026-07-28")


def _text(settled: Settled) -> str:
    if settled.waiting is not None:
        return "Waiting for the learner.\n\n" + _describe(settled.waiting)
    if settled.error:
        return f"Error: {settled.error}"
    return settled.answer or "(no answer)"


def _describe(row: Any) -> str:
    """A waiting question or quiz, for a client without forms (and for ``pending``)."""
    body = row.payload
    if row.kind == "ask_user":
        lines = [
            f"Question (request_id {row.request_id}, mode {body.get('mode')}): {body.get('title')}"
        ]
        if body.get("description"):
            lines.append(body["description"])
        lines += [f"- {o['id']}: {o['label']}" for o in body.get("options", [])]
        lines.append("Answer with the answer tool (selections: option ids, or text).")
        return "\n".join(lines)
    lines = [f"Quiz (quiz_id {row.request_id}): {body.get('title', '')}"]
    for q in body.get("questions", []):
        lines.append(f"- {q.get('id')}: {q.get('prompt') or q.get('question') or ''}")
        lines += [
            f"    - {o.get('id')}: {o.get('label') or o.get('text')}" for o in q.get("options", [])
        ]
    lines.append("Answer with answer_quiz: {question id: [option ids], a number, or text}.")
    return "\n".join(lines)


def serve(
    transport: str = "stdio", host_name: str = "127.0.0.1", port: int = 8765, token: str = ""
) -> None:
    """Run the server until the client hangs up (stdio) or the process is stopped (HTTP).
    Over HTTP every request needs ``Authorization: Bearer <token>``: loopback is shared by
    every account on the machine (a classroom's JupyterHub), and the tutor answers with this
    learner's memory, files and model key."""
    tutor = TutorHost()
    server = build_server(tutor)
    if transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    if not token:
        raise ValueError("an HTTP MCP server needs a token")
    app = BearerToken(server.streamable_http_app(host=host_name), token)
    uvicorn.run(app, host=host_name, port=port, log_level="warning")


class BearerToken:
    """ASGI: requests without the server's bearer token get 401 and reach no tool."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b"A bearer token is required: see docs/mcp.md (deeptutor-jupyter mcp).\n"
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
