"""One MCP server of this kernel: started once, on first need; stopped with the session.

The SDK's ``Client`` is an async context manager whose task group must be entered and left by
one task, so each server gets its own task that holds the connection open until ``stop``; tool
calls from turns go through the open client. Everything a failure says (an exception, the tail
of the server's stderr) is scrubbed of the server's ``env`` and ``headers`` values first.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import tempfile
from collections.abc import Awaitable, Callable
from typing import IO, Any, Literal

from deeptutor_jupyter.tools.base import ToolContext, ToolResult
from deeptutor_jupyter.tools.mcp.config import McpServerConfig

State = Literal["not started", "starting", "ready", "failed", "stopped"]
Ask = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
# The learner-asking function of the tool call running in this task (see ``call``).
_ASKING: contextvars.ContextVar[Ask | None] = contextvars.ContextVar("mcp_asking", default=None)
_STDERR_TAIL = 600
# The options of an approval question; hosts/acp_agent.py shows it as a permission request.
ALLOW, DENY = "allow_once", "reject_once"


class McpConnection:
    def __init__(self, name: str, config: McpServerConfig) -> None:
        self.name = name
        self.config = config
        self.state: State = "not started"
        self.error = ""
        self.tools: list[Any] = []  # the server's mcp.types.Tool list, once ready
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._stderr: IO[str] | None = None
        self._asking: list[Ask] = []  # calls in flight that may ask the learner

    @property
    def secrets(self) -> list[str]:
        return [s for s in self.config.secrets() if s]

    def masked(self, text: str) -> str:
        """Text about this server with its secrets masked (the turn's results are scrubbed
        again by the orchestrator; this covers ``%tutor mcp`` and the start notices)."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "[redacted]")
        return text

    # starting and stopping -------------------------------------------------------------
    async def start(self) -> None:
        """Start the server and list its tools, once; returns when ready or failed."""
        if self._task is None:
            self.state = "starting"
            self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            await asyncio.wait_for(asyncio.shield(self._ready.wait()), self.config.startup_timeout)
        except TimeoutError:
            self._fail(f"it did not start within {self.config.startup_timeout:g} s")
            self._task.cancel()

    async def _run(self) -> None:
        from mcp import Client

        try:
            async with Client(
                self._transport(),
                elicitation_callback=self._elicit,
                read_timeout_seconds=self.config.timeout,
            ) as client:
                self.tools = await _list_tools(client)
                self._client, self.state = client, "ready"
                self._ready.set()
                await self._stop.wait()
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # the SDK raises exception groups from its task groups
            self._fail(self._why(exc))
        finally:
            self._client = None
            if self.state in ("ready", "starting"):
                self.state = "stopped"
            self._ready.set()
            if self._stderr is not None:
                self._stderr.close()

    def _transport(self) -> Any:
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        config = self.config
        if config.url:
            import httpx2

            http = httpx2.AsyncClient(headers=config.headers) if config.headers else None
            return streamable_http_client(config.url, http_client=http)
        # An anonymous file: what the server writes on stderr is read back only to say why it
        # failed (scrubbed), and nothing of it stays on disk.
        # Closed when the connection ends (``_run``), so no ``with`` here.
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        params = StdioServerParameters(
            command=config.command or "", args=config.args, env=config.env, cwd=config.cwd
        )
        return stdio_client(params, errlog=self._stderr)

    async def stop(self) -> None:
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), 5)
            except TimeoutError:
                task.cancel()
        if self.state != "failed":
            self.state = "stopped"

    def _fail(self, why: str) -> None:
        if self.state != "failed":
            self.state, self.error = "failed", self.masked(why)
        self._ready.set()

    def _why(self, exc: BaseException) -> str:
        leaf = _leaf(exc)
        text = f"{type(leaf).__name__}: {leaf}".strip().rstrip(":")
        tail = self._stderr_tail()
        return f"{text}; its stderr ends with: {tail}" if tail else text

    def _stderr_tail(self) -> str:
        if self._stderr is None or self._stderr.closed:
            return ""
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            text = self._stderr.read()
        except (OSError, ValueError):
            return ""
        return " ".join(text.split())[-_STDERR_TAIL:]

    # calling ---------------------------------------------------------------------------
    async def call(self, remote: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Call ``remote`` on the server; every way it can fail is a result naming the server."""
        label = f"MCP server {self.name!r}"
        if self._client is None:
            reason = self.error or f"it is {self.state}"
            return _error(f"{label} is not available: {reason}.")
        if self.config.approve:
            refused = await self._approval(label, remote, arguments, ctx)
            if refused is not None:
                return refused
        token = _ASKING.set(ctx.ask)
        if ctx.ask is not None:
            self._asking.append(ctx.ask)
        try:
            # The timeout bounds each round with the server, not the call: while the learner
            # answers an elicitation between rounds, the server is not the one being slow.
            result = await self._client.call_tool(
                remote, arguments, read_timeout_seconds=self.config.timeout
            )
        except TimeoutError:
            return _error(self._hung(label, remote))
        except Exception as exc:
            message = str(_leaf(exc))
            if "timed out" in message:
                return _error(self._hung(label, remote))
            return _error(
                self.masked(f"{label} failed on {remote!r}: {type(exc).__name__}: {message}")
            )
        finally:
            _ASKING.reset(token)
            if ctx.ask is not None:
                self._asking.remove(ctx.ask)
        return self._result(label, remote, result)

    async def _approval(
        self, label: str, remote: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> ToolResult | None:
        """The learner allows this call (an ask_user question of it), or the refusal."""
        if ctx.ask is None:
            return _error(f"{label} asks for approval of each call, and no form can be shown here.")
        shown = json.dumps(arguments, ensure_ascii=False)
        answer = await ctx.ask(
            {
                "title": f"Allow the MCP server {self.name!r} to run {remote!r}?",
                "description": "Arguments (written by the model): "
                + (shown if len(shown) <= 500 else shown[:500] + "…"),
                "mode": "single",
                "options": [
                    {"id": ALLOW, "label": "Allow once"},
                    {"id": DENY, "label": "Deny"},
                ],
            }
        )
        if answer.get("selections") == [ALLOW]:
            return None
        return _error(f"The learner did not allow {label} to run {remote!r}.")

    def _hung(self, label: str, remote: str) -> str:
        return (
            f"{label} did not answer {remote!r} within {self.config.timeout:g} s "
            "(its timeout); the call was abandoned."
        )

    def _result(self, label: str, remote: str, result: Any) -> ToolResult:
        # Not scrubbed here: the orchestrator scrubs every tool result of the session's secrets,
        # which include this server's (TutorSession.secrets).
        text = _text_of(result)
        if result.is_error:
            message = f"{label} returned an error for {remote!r}: {text or 'no details'}"
            return _error(message)
        data = {"server": self.name, "tool": remote}
        summary = text.splitlines()[0][:120] if text else "(no content)"
        return ToolResult(content=text or "(no content)", data=data, summary=summary)

    async def _elicit(self, context: Any, params: Any) -> Any:
        """The server asks the learner: an ask_user form of the turn whose call is running."""
        import mcp.types as types

        from deeptutor_jupyter.tools.mcp.elicit import answer_of, questions_of

        ask = _ASKING.get() or (self._asking[0] if len(self._asking) == 1 else None)
        schema = getattr(params, "requested_schema", None)
        if ask is None or schema is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST, message="No learner can answer here."
            )
        answers = []
        for question in questions_of(self.name, params.message, schema):
            result = await ask(question)
            if result.get("cancelled"):
                action = "cancel" if result.get("reason") else "decline"
                return types.ElicitResult(action=action)
            answers.append(result)
        return types.ElicitResult(action="accept", content=answer_of(schema, answers))


async def _list_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(100):  # a server whose cursor never ends cannot hang the start
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _text_of(result: Any) -> str:
    parts = []
    for block in result.content:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]")
    if not parts and result.structured_content is not None:
        import json

        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside the exception groups the SDK's task groups raise."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _error(message: str) -> ToolResult:
    return ToolResult(content=message, is_error=True, summary=message)
