"""The OpenAI-compatible gateway: ``/v1/chat/completions`` and ``/v1/models`` under the prefix.

The student's request goes to the upstream with the course's key instead of the student's token.
Streams are relayed chunk by chunk as they arrive (nothing is buffered), and the upstream request
is closed as soon as the student's connection closes (a Stop in the cell). Upstream errors keep
their status, body and ``Retry-After``, so the kernel's error cards (providers/errors.py) word
them as for a direct connection. The gateway's own refusals carry ``"type": "course_service"``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
from pydantic import SecretStr
from tornado.iostream import StreamClosedError
from tornado.web import RequestHandler, stream_request_body

from deeptutor_jupyter.hub.auth import (
    HubUnavailable,
    Identity,
    NotAllowed,
    TokenChecker,
    authorize,
    required_scope,
)
from deeptutor_jupyter.hub.batch import GroupCommit
from deeptutor_jupyter.hub.group_policy import GroupPolicyStore
from deeptutor_jupyter.hub.hints import EXERCISE_HEADER, HintStore, question_of
from deeptutor_jupyter.hub.mastery import MasteryStore, ReportLimiter
from deeptutor_jupyter.hub.packs import PackStore
from deeptutor_jupyter.hub.quota import QuotaStore, Refusal, Ticket
from deeptutor_jupyter.hub.request import ChatBody, RequestError, parse_chat_body
from deeptutor_jupyter.hub.settings import GatewayConfig, Limits
from deeptutor_jupyter.hub.usage_stream import UsageScanner, estimate_prompt_tokens
from deeptutor_jupyter.learning.policy import Decision, PolicySource

if TYPE_CHECKING:
    from deeptutor_jupyter.hub.lti.state import LTIState
    from deeptutor_jupyter.hub.xapi import Statements

log = logging.getLogger("deeptutor.hub")
T = TypeVar("T")

ERROR_TYPE = "course_service"
# A tutor's request with a long conversation and a notebook is well under a megabyte; the cap
# keeps one student from making the service hold hundreds of them in memory.
MAX_BODY_BYTES = 8 << 20
# A body announced larger than this is refused before it is read; between the two, it is read
# and dropped (never held) so that the refusal reaches the student through the proxy.
DRAIN_BODY_BYTES = 64 << 20
OVERRIDE_CACHE_SECONDS = 5.0
# Response headers of the upstream worth passing on; hop-by-hop ones are tornado's business.
_PASSED_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-request-id")


@dataclass
class GatewayState:
    """What every handler shares. ``has_scope`` decides scope filters the way HubAuth does."""

    config: GatewayConfig
    key: SecretStr | None
    quota: QuotaStore
    check_token: TokenChecker
    has_scope: Callable[[Identity, str], bool]
    service_name: str = "deeptutor"
    packs: PackStore | None = None  # course packs (hub/packs.py); None leaves their routes out
    # How many members a hub group has (hub/pack_routes.py), to warn of a mistyped group.
    group_members: Callable[[str], Awaitable[int | None]] | None = None
    lti: LTIState | None = None  # the LMS (hub/lti/), when the course has one
    xapi: Statements | None = None  # learning records (hub/xapi.py), when the course wants them
    # The upstream client is aiohttp (JupyterHub's own dependency): its C parser relays a chunk
    # for a fraction of httpx's cost, which was most of the gateway's CPU per stream
    # (benchmarks/hub_gateway.py). Made on first use, inside the service's event loop.
    _session: aiohttp.ClientSession | None = None
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(4, thread_name_prefix="deeptutor-hub-db")
    )

    _commits: GroupCommit | None = None
    _mastery: MasteryStore | None = None
    _hints: HintStore | None = None
    _group_policy: GroupPolicyStore | None = None
    _reports: ReportLimiter | None = None
    _overrides: dict[str, Limits] = field(default_factory=dict)
    _overrides_until: float = 0.0
    _overrides_loading: asyncio.Future[Any] | None = None
    _policies: dict[tuple[str, ...], tuple[float, list[PolicySource]]] = field(default_factory=dict)

    @property
    def commits(self) -> GroupCommit:
        if self._commits is None:
            self._commits = GroupCommit(self.quota, self.executor)
        return self._commits

    @property
    def mastery(self) -> MasteryStore:
        if self._mastery is None:
            self._mastery = MasteryStore(self.quota.engine, self.quota.clock)
        return self._mastery

    @property
    def reports(self) -> ReportLimiter:
        """Students' mastery and score reports a minute, shared by the replicas."""
        if self._reports is None:
            self._reports = ReportLimiter(self.quota.engine, self.quota.clock)
        return self._reports

    @property
    def hints(self) -> HintStore:
        if self._hints is None:
            self._hints = HintStore(self.quota.engine, self.quota.clock)
        return self._hints

    @property
    def group_policy(self) -> GroupPolicyStore:
        if self._group_policy is None:
            self._group_policy = GroupPolicyStore(self.quota.engine, self.quota.clock)
        return self._group_policy

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # No cap on connections: a cap would queue the 101st student's stream.
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=30)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=None)
            )
        return self._session

    async def db(self, fn: Any, *args: Any) -> Any:
        """Run a database call off the event loop, so open streams keep flowing meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def scrub(self, raw: bytes) -> bytes:
        """An upstream's words with the course's key taken out (some servers echo it back)."""
        if self.key is None:
            return raw
        secret = self.key.get_secret_value().encode()
        if len(secret) < 8:
            return raw
        for form in (secret, json.dumps(secret.decode())[1:-1].encode()):
            raw = raw.replace(form, b"[redacted]")
        return raw

    def upstream_headers(self) -> dict[str, str]:
        # identity: a compressed stream would be held back by the decompressor, and relayed
        # bytes must be what the header says.
        headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        if self.key is not None:
            headers["Authorization"] = f"Bearer {self.key.get_secret_value()}"
        return headers

    async def limits_for(self, identity: Identity) -> Limits:
        """An instructor's override for the student, else group or course limits.

        All overrides are read in one query at most every OVERRIDE_CACHE_SECONDS, so a request
        costs no query of its own; a change on another replica's page arrives within that time.
        """
        if time.monotonic() >= self._overrides_until:
            if self._overrides_loading is None:
                self._overrides_loading = asyncio.ensure_future(self.db(self.quota.overrides))
            loading = self._overrides_loading
            try:
                self._overrides = await asyncio.shield(loading)
                self._overrides_until = time.monotonic() + OVERRIDE_CACHE_SECONDS
            finally:
                if self._overrides_loading is loading:
                    self._overrides_loading = None
        return self._overrides.get(identity.name) or self.config.limits_for(identity.groups)

    async def policies_for(self, groups: tuple[str, ...]) -> list[PolicySource]:
        """The policies for these groups, read at most every OVERRIDE_CACHE_SECONDS (a policy
        the instructor publishes or sets applies within that time, on every replica): those an
        instructor set for the groups (hub/group_policy.py), which replace the packs'; else the
        packs' TUTOR.md policies."""
        cached = self._policies.get(groups)
        if cached is not None and time.monotonic() < cached[0]:
            return cached[1]
        found: list[PolicySource] = await self.db(self.group_policy.for_groups, groups)
        if not found and self.packs is not None:
            found = await self.db(self.packs.policies, groups)
        self._policies[groups] = (time.monotonic() + OVERRIDE_CACHE_SECONDS, found)
        return found

    def forget_policies(self) -> None:
        self._policies.clear()

    def forget_override(self, student: str) -> None:
        """This replica saw an instructor change a student's limits: read them again."""
        self._overrides_until = 0.0


def error_body(code: str, message: str) -> dict[str, Any]:
    """OpenAI's error shape, so every client quotes ``message``."""
    return {"error": {"message": message, "type": ERROR_TYPE, "code": code, "param": None}}


class ApiHandler(RequestHandler):
    """Token-authenticated JSON handlers: no cookies, so no XSRF check applies."""

    state: GatewayState

    def initialize(self, state: GatewayState) -> None:
        self.state = state

    def check_xsrf_cookie(self) -> None:
        return None

    def fail(self, status: int, code: str, message: str, retry_after: int | None = None) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        if retry_after is not None:
            self.set_header("Retry-After", str(retry_after))
        self.finish(json.dumps(error_body(code, message)))

    async def identify(self) -> Identity | None:
        """The student, or None after the refusal has been sent."""
        state = self.state
        scope = required_scope(state.service_name)
        try:
            return await authorize(
                self.request.headers.get("Authorization"),
                state.check_token,
                state.service_name,
                lambda who: state.has_scope(who, scope),
            )
        except NotAllowed as exc:
            self.fail(exc.status, exc.code, exc.message)
        except HubUnavailable:
            log.warning("the hub could not check a token")
            self.fail(503, "hub_unavailable", "The hub could not confirm who you are; try again.")
        return None


class ModelsHandler(ApiHandler):
    async def get(self) -> None:
        if await self.identify() is None:
            return
        data = [
            {"id": m, "object": "model", "owned_by": "course"} for m in self.state.config.models
        ]
        self.finish({"object": "list", "data": data})


@stream_request_body
class ChatCompletionsHandler(ApiHandler):
    """The body is read only after the token was checked, and only up to MAX_BODY_BYTES."""

    _relay: asyncio.Task[None] | None = None
    _record: asyncio.Future[Any] | None = None
    _hinted = False
    _gone = False
    _marks: list[tuple[str, float]]
    _identity: Identity | None = None
    _chunks: list[bytes]
    _size = 0

    def on_connection_close(self) -> None:
        # The student's cell stopped (or the kernel died): drop the upstream request at once.
        self._gone = True
        if self._relay is not None:
            self._relay.cancel()

    async def prepare(self) -> None:
        started = time.perf_counter()
        self._chunks = []
        if self.request.method != "POST":
            return
        self._identity = await self.identify()
        if self._identity is None:
            return  # refused: the body is never read
        self._marks = [("auth", time.perf_counter() - started)]
        declared = self.request.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > DRAIN_BODY_BYTES:
            self._too_large()  # and the connection closes: not worth reading
            return
        connection = self.request.connection
        if connection is not None and hasattr(connection, "set_max_body_size"):
            connection.set_max_body_size(DRAIN_BODY_BYTES)

    def data_received(self, chunk: bytes) -> None:
        # Past MAX_BODY_BYTES the rest is read and dropped, and the 413 goes out once it has
        # arrived: answered mid-body, the connection closes under a proxy still sending it,
        # and configurable-http-proxy then answers 503 instead of passing the 413 on.
        if self._finished:
            return
        self._size += len(chunk)
        if self._size > MAX_BODY_BYTES:
            self._chunks = []
            return
        self._chunks.append(chunk)

    def _too_large(self) -> None:
        self.fail(
            413,
            "request_too_large",
            f"The request is larger than the course service takes ({MAX_BODY_BYTES >> 20} MiB).",
        )

    async def post(self) -> None:
        identity = self._identity
        if identity is None or self._finished:
            return
        if self._size > MAX_BODY_BYTES:
            self._too_large()
            return
        try:
            body, raw = parse_chat_body(b"".join(self._chunks))
        except RequestError as exc:
            self.fail(400, "invalid_request", str(exc))
            return
        finally:
            self._chunks = []
        allowed = self.state.config.models
        if allowed and body.model not in allowed:
            offered = ", ".join(allowed)
            self.fail(
                404,
                "model_not_offered",
                f"Your course does not offer the model '{body.model}'. Available: {offered}.",
            )
            return
        if await self._policy_refuses(identity, raw):
            return
        admitting = time.perf_counter()
        ticket = await self._admit(identity, body, raw)
        if ticket is None:
            return
        self._marks.append(("admit", time.perf_counter() - admitting))
        self._record_question(identity, raw)
        self._relay = asyncio.ensure_future(self._forward(raw, body.model, ticket, body.stream))
        try:
            await self._relay
        except asyncio.CancelledError:
            if not self._gone:
                raise

    def _record_question(self, identity: Identity, raw: dict[str, Any]) -> None:
        """An ``asked`` learning record when the request starts a turn (hub/xapi.py); written
        off the loop, and never in the way of the answer."""
        records = self.state.xapi
        if records is None:
            return
        from deeptutor_jupyter.hub.xapi import is_question

        question = is_question(raw)
        if question is not None:
            self._record = asyncio.ensure_future(
                self.state.db(records.asked, identity.name, question, self._hinted)
            )
            self._record.add_done_callback(_log_failure)

    async def _policy_refuses(self, identity: Identity, raw: dict[str, Any]) -> bool:
        """The course pack's AI policy, enforced here where no student can edit it
        (docs/policy.md): in an ``off`` window for the student's groups nothing goes upstream;
        in ``hints`` the policy's instruction goes first in the request, whatever the kernel
        sent. The gateway knows no cells: only entries without ``tags`` apply here."""
        from deeptutor_jupyter.learning.policy import decide, gateway_hints_block

        hints = None
        for source in await self.state.policies_for(identity.groups):
            decision = decide(source)
            if decision.mode == "off":
                self.fail(403, "policy_off", decision.refusal())
                return True
            if decision.mode == "hints" and hints is None:
                hints = decision
        if hints is not None:
            if await self._hints_used(identity, hints, raw):
                return True
            self._hinted = True  # the question asks for a hint (a learning record's activity)
            system = {"role": "system", "content": gateway_hints_block(hints)}
            raw["messages"] = [system, *raw.get("messages", [])]
        return False

    async def _hints_used(self, identity: Identity, hints: Decision, raw: dict[str, Any]) -> bool:
        """The hints cap per student and exercise (hub/hints.py), in the service's database:
        the same count from every kernel, replica or hand-made request."""
        from deeptutor_jupyter.hub.hints import BACKGROUND, ROUNDS_PER_HINT, ladder_of
        from deeptutor_jupyter.learning.policy import CAP_REACHED, DEFAULT_HINTS

        cap = hints.hints if hints.hints is not None else DEFAULT_HINTS
        day = self.state.quota.clock().date().isoformat()
        exercise, cap = ladder_of(self.request.headers.get(EXERCISE_HEADER), raw, cap, day)
        taken = await self.state.db(
            self.state.hints.take, identity.name, exercise, question_of(raw), cap
        )
        if taken.refused == "cap" and exercise.startswith(BACKGROUND):
            words = (
                f"The course's hints policy ({hints.source}) allows {cap} requests a day without "
                "the tutor's tools (grading, memory, books); that is all for today."
            )
            self.fail(403, "policy_hints_used", words)
            return True
        if taken.refused == "cap":
            self.fail(403, "policy_hints_used", CAP_REACHED.format(cap=cap, source=hints.source))
            return True
        if taken.refused == "rounds":
            words = (
                f"This hint has had its {ROUNDS_PER_HINT} requests (policy from {hints.source}). "
                "Ask a new question for the next hint, or ask your instructor."
            )
            self.fail(403, "policy_hints_used", words)
            return True
        return False

    async def _admit(
        self, identity: Identity, body: ChatBody, raw: dict[str, Any]
    ) -> Ticket | None:
        """Hold the prompt and the answer within the day's budget; the answer length granted
        is what goes upstream as the request's token limit, so the budget is a cap."""
        limits = await self.state.limits_for(identity)
        config = self.state.config
        asked = body.asked_tokens
        answer = asked if asked is not None else config.reserve_tokens
        outcome = await self.state.commits.admit(
            identity.name, limits, answer, estimate_prompt_tokens(raw)
        )
        if isinstance(outcome, Refusal):
            self.fail(429, outcome.code, outcome.message, outcome.retry_after)
            return None
        if body.max_completion_tokens is not None:
            raw["max_completion_tokens"] = outcome.answer
        elif body.max_tokens is not None:
            raw["max_tokens"] = outcome.answer
        else:
            raw[config.max_tokens_param] = outcome.answer
        return outcome

    async def _forward(
        self, body: dict[str, Any], model: str, ticket: Ticket, streaming: bool
    ) -> None:
        if streaming:
            # The upstream's own count is the one to bill; ask for it on every stream.
            options = body.get("stream_options")
            body["stream_options"] = {**(options if isinstance(options, dict) else {})}
            body["stream_options"]["include_usage"] = True
        scanner = UsageScanner()
        settled = False
        try:
            # The gateway's own share of the latency: from the request's arrival until sending,
            # and within it the token check and the admission.
            own = [("gateway", self.request.request_time()), *self._marks]
            self.set_header(
                "Server-Timing", ", ".join(f"{name};dur={s * 1000:.2f}" for name, s in own)
            )
            response = await self._send(body)
            if streaming and await _rejects_stream_options(response):
                # An upstream without include_usage (some servers): go on without it; the
                # usage is then estimated (hub/usage_stream.py).
                body.pop("stream_options", None)
                response = await self._send(body)
        except (aiohttp.ClientError, TimeoutError) as exc:
            await self.state.commits.release(ticket)
            self._upstream_unreachable(exc)
            return
        except asyncio.CancelledError:
            # The student left before the upstream answered: give the hold back.
            await asyncio.shield(self.state.commits.release(ticket))
            raise
        try:
            self.set_status(response.status)
            for name in _PASSED_HEADERS:
                if name in response.headers:
                    self.set_header(name, response.headers[name])
            if response.status in (401, 403):
                # The upstream refused the course's key, not the student's token: passed on
                # as is, the student's cell would tell them to fix a key they do not have.
                said = _upstream_message(self.state.scrub(await response.read()))
                self.clear_header("Retry-After")
                self.fail(
                    502,
                    "upstream_key_rejected",
                    f"The model server refused the course's key{said}. Tell your instructor.",
                )
                await self.state.commits.release(ticket)
                settled = True
                return
            if response.status != 200:
                self.finish(self.state.scrub(await response.read()))
                await self.state.commits.release(ticket)
                settled = True
                return
            if streaming:
                # Small SSE writes must leave at once: with Nagle on, each one after the first
                # waits for the client's delayed ACK (about 40 ms on Linux).
                stream = getattr(self.request.connection, "stream", None)
                if stream is not None:
                    stream.set_nodelay(True)
                self.set_header("Cache-Control", "no-cache")
                self.set_header("X-Accel-Buffering", "no")
                async for chunk in response.content.iter_any():
                    scanner.feed(chunk)
                    self.write(chunk)
                    try:
                        await self.flush()
                    except StreamClosedError:
                        self._gone = True
                        break
            else:
                data = await response.read()
                scanner.feed_json(data)
                self.write(data)
            if not self._gone:
                self.finish()
        except (aiohttp.ClientError, TimeoutError) as exc:
            # The upstream dropped mid-answer. Cutting the student's connection would not get
            # through configurable-http-proxy (it keeps the client waiting), so the stream ends
            # with an error event, which OpenAI clients and the kernel raise as a broken answer.
            log.warning("upstream failed mid-answer: %s", type(exc).__name__)
            if not self._gone:
                error = error_body(
                    "upstream_dropped", "The course's model server stopped answering."
                )
                error["error"]["code"] = 502
                self.finish(b"data: " + json.dumps(error).encode() + b"\n\n")
        finally:
            # Read to its end, the connection goes back to the pool; else (a Stop) it closes.
            if response.content.at_eof():
                response.release()
            else:
                response.close()
            if not settled:
                # The prompt estimate made at admission (the whole body serialised once).
                prompt, completion = scanner.usage(ticket.prompt)
                await asyncio.shield(self.state.commits.settle(ticket, model, prompt, completion))

    async def _send(self, body: dict[str, Any]) -> aiohttp.ClientResponse:
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=10.0, sock_read=self.state.config.upstream_timeout
        )
        return await self.state.session().post(
            self.state.config.upstream_url + "/chat/completions",
            data=json.dumps(body).encode(),
            headers=self.state.upstream_headers(),
            timeout=timeout,
        )

    def _upstream_unreachable(self, exc: Exception) -> None:
        log.warning("upstream unreachable: %s", type(exc).__name__)
        if isinstance(exc, TimeoutError):
            self.fail(504, "upstream_timeout", "The course's model server did not answer in time.")
        else:
            self.fail(
                502,
                "upstream_unreachable",
                "The course's model server could not be reached; tell your instructor.",
            )


def _log_failure(done: asyncio.Future[Any]) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.warning("a learning record was not written: %s", type(done.exception()).__name__)


async def _rejects_stream_options(response: aiohttp.ClientResponse) -> bool:
    """Whether the upstream refused ``stream_options``; the refused response is then closed."""
    if response.status not in (400, 422):
        return False
    text = (await response.read()).decode("utf-8", "replace")
    if "stream_options" in text or "include_usage" in text:
        response.release()
        return True
    return False


def _upstream_message(raw: bytes) -> str:
    """`` ("its message")`` from an OpenAI-shaped error body, or nothing."""
    try:
        data = json.loads(raw)
    except ValueError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return f' ("{str(message)[:200]}")' if message else ""
