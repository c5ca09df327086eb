"""Framework overhead of a turn against a zero-latency fake model, relative to bare httpx.

One ``FakeLLMServer`` (no delays) serves everything; one ``asyncio.run`` measures, interleaved
in each iteration so that drift on a busy machine hits every variant alike:

* ``bare 1``: an ``httpx.AsyncClient`` streams ``POST /chat/completions`` with exactly the body
  the turn sends (captured from a warm-up turn) and reads the whole SSE body;
* ``turn 1``: a full one-round turn: ``TurnContext`` + ``Orchestrator.start_turn`` with a real
  ``Store`` (SQLite in a temp dir) and ``make_model(provider="custom")``, awaiting the task;
* ``bare 2`` / ``turn 2``: the same for a two-round turn: a ``calculate`` tool call, then the
  answer; bare 2 replays both captured request bodies with the same scripted replies;
* ``turn 1 (store=None)``: the one-round turn without persistence, to show what SQLite costs;
* ``bare 1, new connection``: bare 1 with ``Connection: close``, to show what a TCP connect per
  request costs (the provider does not reuse its connection: see the connection counts).

The fake server's handler gets ``disable_nagle_algorithm = True`` here (``--server-nagle`` keeps
its default): otherwise its last chunk (``0\r\n\r\n``) waits for the client's delayed ACK and
every client that reads a response to its end pays ~40 ms on Linux loopback, which would bury
the framework in a network artefact.

No widgets: the kernel's ``TurnView`` is a rendering surface, not framework overhead. The
overhead per round is ``(turn - bare) / rounds`` with the matching bare sequence (the "rounds x
bare" of the issue, with each round's own body and reply). Goal: under 5 ms a round.

Usage::

    .venv/bin/python benchmarks/turn_overhead.py             # 200 iterations
    .venv/bin/python benchmarks/turn_overhead.py -n 50
    .venv/bin/python benchmarks/turn_overhead.py --quick     # 3 iterations (smoke test)
    .venv/bin/python benchmarks/turn_overhead.py --profile   # + cProfile of 2-round turns

Timings are from one run on one machine: compare the lines of the same run, not across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from deeptutor_jupyter.providers import make_model  # noqa: E402
from deeptutor_jupyter.providers.base import ChatModel  # noqa: E402
from deeptutor_jupyter.runtime.context import ModelProfile, TurnContext  # noqa: E402
from deeptutor_jupyter.runtime.events import EventLog  # noqa: E402
from deeptutor_jupyter.runtime.orchestrator import Orchestrator  # noqa: E402
from deeptutor_jupyter.store.db import Store  # noqa: E402
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec, fake_llm  # noqa: E402

GOAL_MS = 5.0
MODEL = "fake-model"
QUESTION = "What is 6 times 7?"
ANSWER = "6 times 7 is **42**: six groups of seven, or $6 \\times 7 = 42$."
TEXT = Reply(text=ANSWER)
TOOL = Reply(tool_calls=[ToolCallSpec("calculate", {"expression": "6*7"}, id="call_bench")])

# What each variant asks the server for, in order; one iteration queues all of them.
SCRIPTS: dict[str, list[Reply]] = {
    "bare1": [TEXT],
    "turn1": [TEXT],
    "bare2": [TOOL, TEXT],
    "turn2": [TOOL, TEXT],
    "nostore1": [TEXT],
    "bare1new": [TEXT],
}
ORDER = ("bare1", "turn1", "bare2", "turn2", "nostore1", "bare1new")
LABELS = {
    "bare1": "bare httpx, 1 request",
    "turn1": "turn, 1 round",
    "bare2": "bare httpx, 2 requests",
    "turn2": "turn, 2 rounds (calculate)",
    "nostore1": "turn, 1 round, store=None",
    "bare1new": "bare httpx, 1 req, new conn",
}


class ConnectionCounter:
    """Counts TCP connections the fake server accepts (its internals; None if they moved)."""

    def __init__(self) -> None:
        self.count: int | None = None
        server_cls = getattr(fake_llm, "_Server", None)
        original = getattr(server_cls, "process_request", None)
        if server_cls is None or original is None:
            return
        self.count = 0
        counter = self

        def process_request(server: Any, request: Any, client_address: Any) -> None:
            if counter.count is not None:
                counter.count += 1
            original(server, request, client_address)

        server_cls.process_request = process_request


def configure_server(nagle: bool) -> str:
    handler = getattr(fake_llm, "_Handler", None)
    if handler is None:
        return "server socket options: unknown (FakeLLMServer internals moved)"
    if not nagle:
        handler.disable_nagle_algorithm = True
        return "server TCP_NODELAY on (set by this benchmark)"
    return "server TCP_NODELAY off (FakeLLMServer default; expect ~40 ms delayed-ACK stalls)"


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


class Bench:
    def __init__(self, server: FakeLLMServer, home: Path) -> None:
        self.server = server
        self.store = Store(home / "state.db")
        self.store.ensure_session("bench", "benchmarks/turn_overhead.py")
        self.orchestrator = Orchestrator(self.store)
        self.bare_orchestrator = Orchestrator(None)
        self.model: ChatModel = make_model(provider="custom", model=MODEL, base_url=server.url)
        self.profile = ModelProfile(provider="custom", model=MODEL, base_url=server.url)
        self.client = httpx.AsyncClient()
        self.closing_client = httpx.AsyncClient()  # its own pool: closing never hits self.client
        self.url = f"{server.url}/chat/completions"
        self.bodies: dict[int, list[dict[str, Any]]] = {}
        self.serial = 0

    async def close(self) -> None:
        await self.client.aclose()
        await self.closing_client.aclose()
        close = getattr(self.model, "aclose", None)
        if close is not None:
            await close()
        self.store.close()

    # the variants ----------------------------------------------------------------------
    async def turn(self, rounds: int, *, store: bool = True) -> None:
        self.serial += 1
        ctx = TurnContext(
            session_id="bench",
            turn_id=f"bench-{self.serial}",
            question=QUESTION,
            profile=self.profile,
        )
        orchestrator = self.orchestrator if store else self.bare_orchestrator
        log = EventLog(ctx.turn_id, orchestrator.store)
        turn = orchestrator.start_turn(ctx, self.model, log)
        assert turn.task is not None
        await turn.task
        if turn.status != "done" or turn.answer != ANSWER:
            errors = [e.fields() for e in log.events if e.body.type == "error"]
            raise SystemExit(f"turn failed: status={turn.status} answer={turn.answer!r} {errors}")
        calls = sum(1 for e in log.events if e.body.type == "tool_call")
        if calls != rounds - 1:
            raise SystemExit(f"expected {rounds - 1} tool call(s), the turn made {calls}")

    async def bare(self, rounds: int, *, close: bool = False) -> None:
        headers = {"Accept": "text/event-stream"}
        client = self.client
        if close:
            headers["Connection"] = "close"
            client = self.closing_client
        for body in self.bodies[rounds]:
            async with client.stream("POST", self.url, json=body, headers=headers) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise SystemExit(f"bare request failed: {response.status_code} {response.text}")
                async for _ in response.aiter_bytes():
                    pass

    async def capture_bodies(self) -> None:
        """Run one turn of each shape and keep the request bodies it sent, for the bare client."""
        for rounds, script in ((1, [TEXT]), (2, [TOOL, TEXT])):
            self.server.clear_requests()
            self.server.extend(script)
            await self.turn(rounds)
            self.bodies[rounds] = [r.body for r in self.server.requests]
            if len(self.bodies[rounds]) != rounds:
                raise SystemExit(f"expected {rounds} request(s), saw {len(self.bodies[rounds])}")

    def variants(self) -> dict[str, Callable[[], Awaitable[None]]]:
        return {
            "bare1": lambda: self.bare(1),
            "turn1": lambda: self.turn(1),
            "bare2": lambda: self.bare(2),
            "turn2": lambda: self.turn(2),
            "nostore1": lambda: self.turn(1, store=False),
            "bare1new": lambda: self.bare(1, close=True),
        }

    async def measure(
        self, iterations: int, warmup: int, counter: ConnectionCounter
    ) -> tuple[dict[str, list[float]], dict[str, float | None]]:
        total = iterations + warmup
        self.server.extend(r for _ in range(total) for name in ORDER for r in SCRIPTS[name])
        variants = self.variants()
        times: dict[str, list[float]] = {name: [] for name in ORDER}
        conns: dict[str, int] = dict.fromkeys(ORDER, 0)
        for i in range(total):
            for name in ORDER:
                before = counter.count or 0
                t0 = time.perf_counter()
                await variants[name]()
                elapsed = (time.perf_counter() - t0) * 1e3
                if i >= warmup:
                    times[name].append(elapsed)
                    conns[name] += (counter.count or 0) - before
        left = self.server.pending
        if left:
            raise SystemExit(f"{left} scripted replies were not consumed: the variants drifted")
        per_call = {
            name: (n / iterations if counter.count is not None else None)
            for name, n in conns.items()
        }
        return times, per_call

    async def run_profile(self, turns: int) -> None:
        import cProfile
        import pstats

        self.server.extend(r for _ in range(turns) for r in SCRIPTS["turn2"])
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(turns):
            await self.turn(2)
        profiler.disable()
        print(f"cProfile: {turns} two-round turns, top functions by own time")
        stats = pstats.Stats(profiler, stream=sys.stdout)
        stats.sort_stats("tottime").print_stats(20)
        stats.sort_stats("cumulative").print_stats(r"deeptutor_jupyter", 25)


async def run(args: argparse.Namespace) -> int:
    iterations = 3 if args.quick else max(1, args.n)
    warmup = 1 if args.quick else min(20, max(1, iterations // 10))
    socket_note = configure_server(args.server_nagle)
    counter = ConnectionCounter()
    with FakeLLMServer() as server, tempfile.TemporaryDirectory(prefix="dt-bench-") as home:
        bench = Bench(server, Path(home))
        try:
            await bench.capture_bodies()
            times, conns = await bench.measure(iterations, warmup, counter)
            if args.profile:
                await bench.run_profile(args.profile_turns)
        finally:
            await bench.close()

    print(
        f"turn overhead benchmark: {iterations} iterations after {warmup} warm-up, interleaved; "
        f"Python {sys.version.split()[0]}, httpx {httpx.__version__}, {os.cpu_count()} CPU(s)"
    )
    print(f"  zero-latency FakeLLMServer on 127.0.0.1, {socket_note}")
    print("  no widgets: the kernel's TurnView is a view, not framework overhead")
    for name in ORDER:
        values = times[name]
        c = conns[name]
        print(
            f"  {LABELS[name]:<28} median {median(values):7.2f} ms   "
            f"p90 {percentile(values, 90):7.2f} ms   "
            f"TCP connections/call {'n/a' if c is None else f'{c:.2f}'}"
        )
    m = {name: median(v) for name, v in times.items()}
    print(f"  ratio turn/bare, 1 round:  {m['turn1'] / m['bare1']:.2f}x")
    print(f"  ratio turn/bare, 2 rounds: {m['turn2'] / m['bare2']:.2f}x")
    one = m["turn1"] - m["bare1"]
    two = (m["turn2"] - m["bare2"]) / 2
    naive = (m["turn2"] - 2 * m["bare1"]) / 2
    ok = max(one, two) < GOAL_MS
    print(f"  overhead per round, 1-round turn: {one:6.2f} ms")
    print(f"  overhead per round, 2-round turn: {two:6.2f} ms   (vs 2 x bare 1: {naive:.2f} ms)")
    print(f"  SQLite store share, 1 round:      {m['turn1'] - m['nostore1']:6.2f} ms")
    print(f"  new TCP connection (bare):        {m['bare1new'] - m['bare1']:6.2f} ms")
    print(
        f"RESULT: {'PASS' if ok else 'FAIL'} "
        f"(goal: framework overhead under {GOAL_MS:.0f} ms a round; worst {max(one, two):.2f} ms)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=200, help="measured iterations per variant")
    parser.add_argument("--quick", action="store_true", help="3 iterations (smoke test)")
    parser.add_argument("--profile", action="store_true", help="also cProfile two-round turns")
    parser.add_argument(
        "--server-nagle",
        action="store_true",
        help="keep the fake server's default socket options (Nagle on) to see the ACK stall",
    )
    parser.add_argument("--profile-turns", type=int, default=100, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
