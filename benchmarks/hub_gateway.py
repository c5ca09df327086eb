"""The course gateway's added latency and memory, against the same upstream in the same run.

One ``FakeLLMServer`` (Nagle off, as in turn_overhead.py) is the upstream. The gateway runs in
its own process (``deeptutor_jupyter.hub.app.make_app``, SQLite quota store, a budget for every
student) with one stand-in: tokens are accepted by a table instead of being checked with a hub,
because HubAuth caches a token after its first check and a hub round-trip is not the gateway's
cost. Each round opens N concurrent streams directly to the upstream and N through the gateway
(order alternating between rounds), each from its own student token, and records per stream
the time to the first content byte and to the end of the answer.

Printed: p50/p95 of both, the gateway's own pre-forward time (for information), end-to-end
p95 of whole answers through the gateway beside the direct upstream (the anchor, same run) at 1,
10 and N concurrent streams, the same at 10 streams while another connection writes to the
gateway's database (it holds SQLite's write lock ``--write-hold-ms`` of every
``--write-hold-ms + --write-gap-ms``, as a flood of mastery reports or a backup would), and the
gateway's memory per open stream (RSS with 2N streams held open minus RSS with N, over N).
Goal (issues 13, 28): end-to-end p95 added under 10 ms at 100 concurrent streams; a gateway
p95 below the direct one is noise and counts as 0 added.

Usage::

    .venv/bin/python benchmarks/hub_gateway.py             # 100 streams, 5 rounds
    .venv/bin/python benchmarks/hub_gateway.py -n 200 --rounds 3
    .venv/bin/python benchmarks/hub_gateway.py --quick     # 10 streams, 1 round (smoke test)

Timings are from one run on one machine: compare the lines of the same run, not across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from deeptutor_jupyter.testing import FakeLLMServer, Reply, fake_llm
from deeptutor_jupyter.testing.ports import free_port

KEY = "sk-bench-upstream"
PREFIX = "/services/deeptutor/"
# The gateway's own time per request before forwarding (its Server-Timing header).
OWN_MS: list[float] = []
PARTS_MS: dict[str, list[float]] = {}  # within it: the token check and the admission


def serve_gateway(port: int, upstream: str, db: str) -> None:
    """The child process: the real gateway app with a token table instead of the hub."""
    from pydantic import SecretStr

    from deeptutor_jupyter.hub.app import make_app
    from deeptutor_jupyter.hub.auth import Identity
    from deeptutor_jupyter.hub.gateway import GatewayState
    from deeptutor_jupyter.hub.quota import QuotaStore, make_engine
    from deeptutor_jupyter.hub.settings import GatewayConfig, Limits

    async def check(token: str) -> Identity | None:
        return (
            Identity(name=token.removeprefix("student-")) if token.startswith("student-") else None
        )

    config = GatewayConfig(
        upstream_url=upstream,
        models=("fake-model",),
        limits=Limits(daily_tokens=10**12, requests_per_minute=None),
        db_url=f"sqlite:///{db}",
    )
    state = GatewayState(
        config=config,
        key=SecretStr(KEY),
        quota=QuotaStore(make_engine(config.db_url)),
        check_token=check,
        has_scope=lambda _identity, _scope: True,
    )

    async def main() -> None:
        make_app(state, PREFIX, oauth=False).listen(port, address="127.0.0.1")
        await asyncio.Event().wait()

    profile = os.environ.get("HUB_BENCH_PROFILE")
    if profile:
        # --profile: the gateway's own CPU, written when the benchmark stops it.
        import cProfile
        import signal

        profiler = cProfile.Profile()

        def dump(*_args: Any) -> None:
            profiler.disable()
            profiler.dump_stats(profile)
            raise SystemExit(0)

        signal.signal(signal.SIGTERM, dump)
        profiler.enable()
    asyncio.run(main())


def serve_upstream(fast: int, slow: int, after: int) -> None:
    """The child process holding the upstream, so it competes with neither client nor gateway."""
    fake_llm._Handler.disable_nagle_algorithm = True  # see turn_overhead.py
    # socketserver's default backlog of 5 resets connections when 100 clients connect at once.
    fake_llm._Server.request_queue_size = 1024
    usage = {"prompt_tokens": 9, "completion_tokens": 20}
    quick = Reply(chunks=[f"word{i} " for i in range(20)], usage=usage)
    held = Reply(chunks=[f"w{i} " for i in range(40)], chunk_delay=0.5, usage=usage)
    script = [quick] * fast + [held] * slow + [quick] * after
    server = FakeLLMServer(script, api_key=KEY).start()
    print(server.url, flush=True)
    while True:
        time.sleep(3600)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def one_stream(
    client: httpx.AsyncClient, url: str, student: int, started: list[int] | None = None
) -> tuple[float, float]:
    body = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "Explain limits."}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    headers = {"Authorization": f"Bearer {KEY}"}
    if "/services/" in url:
        headers = {"Authorization": f"Bearer student-{student}"}
    start = time.perf_counter()
    first = 0.0
    async with client.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}: {await response.aread()!r}")
        timing = dict(
            part.strip().split(";dur=", 1)
            for part in response.headers.get("server-timing", "").split(",")
            if ";dur=" in part
        )
        if "gateway" in timing:
            OWN_MS.append(float(timing["gateway"]))
            PARTS_MS.setdefault("auth", []).append(float(timing.get("auth", 0)))
            PARTS_MS.setdefault("admit", []).append(float(timing.get("admit", 0)))
        async for chunk in response.aiter_bytes():
            if not first and b'"content": "' in chunk:
                first = time.perf_counter() - start
                if started is not None:
                    started.append(student)
    return first, time.perf_counter() - start


async def burst(client: httpx.AsyncClient, url: str, n: int) -> list[tuple[float, float]]:
    return await asyncio.gather(*(one_stream(client, url, i) for i in range(n)))


async def one_at_a_time(
    client: httpx.AsyncClient, direct: str, via: str, count: int, label: str = "alone"
) -> None:
    """Requests one after another, alternating direct and through the gateway: the added
    latency of a single request, with no queue anywhere."""
    pairs: list[tuple[float, float]] = []
    for i in range(count):
        d = (await one_stream(client, direct, i))[0]
        g = (await one_stream(client, via, i))[0]
        pairs.append((d, g))
    own = OWN_MS[-count:] or [0.0]
    admit = PARTS_MS.get("admit", [])[-count:] or [0.0]
    added = [(g - d) * 1000 for d, g in pairs]
    direct_ms = [d * 1000 for d, _ in pairs]
    print(
        f"one request at a time, {label} ({count}): direct first byte p50 "
        f"{percentile(direct_ms, 0.5):.2f} ms; added p50 {percentile(added, 0.5):+.2f} ms"
        f"  p95 {percentile(added, 0.95):+.2f} ms; gateway's own work p50 "
        f"{percentile(own, 0.5):.2f} ms (admission {percentile(admit, 0.5):.2f} ms)"
    )


GROWTH: dict[int, dict[str, list[tuple[float, float]]]] = {}
WRITE_ARGS: dict[str, float] = {}


def args_text(write: dict[str, float]) -> str:
    return f"{write['hold']:g} ms of every {write['hold'] + write['gap']:g} ms"


def growth_plan(n: int, rounds: int) -> list[tuple[int, int]]:
    """(concurrent streams, bursts of each) below n: about 200 answers a size, at least 15."""
    return [(size, max(15, -(-200 // size)) if rounds > 1 else 3) for size in (1, 10) if size < n]


def end_to_end(results: dict[str, list[tuple[float, float]]]) -> tuple[float, float, float]:
    """(direct p95, gateway p95, gateway's added p95 never below 0) of whole answers, in ms."""
    d = percentile([t * 1000 for _, t in results["direct"]], 0.95)
    g = percentile([t * 1000 for _, t in results["gateway"]], 0.95)
    return d, g, max(g - d, 0.0)


def hold_write_lock(db: str, hold: float, gap: float, stop: threading.Event) -> int:
    """Another writer of the gateway's SQLite file: takes the write lock for ``hold`` seconds,
    lets go for ``gap``, until ``stop``; the number of times it held it."""
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS bench_writer (at REAL)")
    times = 0
    while not stop.is_set():
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO bench_writer (at) VALUES (?)", (time.time(),))
        time.sleep(hold)
        conn.execute("COMMIT")
        times += 1
        time.sleep(gap)
    conn.close()
    return times


def write_load_plan(n: int, rounds: int) -> tuple[int, int]:
    """(concurrent streams, bursts) under write load: 10 (or n if fewer), as growth_plan."""
    size = min(10, n)
    return size, max(15, -(-200 // size)) if rounds > 1 else 3


async def under_write_load(
    client: httpx.AsyncClient, direct: str, via: str, args: argparse.Namespace, db: str
) -> None:
    """10 concurrent streams (or N if fewer), alternating direct and through the gateway,
    while another connection keeps taking the database's write lock."""
    size, times = write_load_plan(args.n, args.rounds)
    stop = threading.Event()
    hold, gap = args.write_hold_ms / 1000, args.write_gap_ms / 1000
    writer = asyncio.get_running_loop().run_in_executor(None, hold_write_lock, db, hold, gap, stop)
    loaded: dict[str, list[tuple[float, float]]] = {"direct": [], "gateway": []}
    try:
        for r in range(times):
            order = [("direct", direct), ("gateway", via)]
            for name, url in order if r % 2 == 0 else order[::-1]:
                loaded[name] += await burst(client, url, size)
    finally:
        stop.set()
        held = await writer
    WRITE_LOAD[size] = (loaded, held)


WRITE_LOAD: dict[int, tuple[dict[str, list[tuple[float, float]]], int]] = {}


async def until(predicate: Any) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def measure(args: argparse.Namespace, upstream: str, gateway: str, pid: int, db: str) -> None:
    direct = f"{upstream}/chat/completions"
    via = f"{gateway}{PREFIX}v1/chat/completions"
    n = args.n
    limits = httpx.Limits(max_connections=4 * n, max_keepalive_connections=4 * n)
    results: dict[str, list[tuple[float, float]]] = {"direct": [], "gateway": []}
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        # Warm-up: connections, tables, the students' rows.
        await burst(client, direct, n)
        await burst(client, via, n)
        await one_at_a_time(client, direct, via, args.single)
        OWN_MS.clear()
        PARTS_MS.clear()
        for r in range(args.rounds):
            order = [("direct", direct), ("gateway", via)]
            for name, url in order if r % 2 == 0 else order[::-1]:
                results[name] += await burst(client, url, n)
        own_in_rounds = (list(OWN_MS), {k: list(v) for k, v in PARTS_MS.items()})
        # How it grows with the class: the same alternation at 1 and 10 concurrent streams.
        for size, times in growth_plan(n, args.rounds):
            grown: dict[str, list[tuple[float, float]]] = {"direct": [], "gateway": []}
            for r in range(times):
                order = [("direct", direct), ("gateway", via)]
                for name, url in order if r % 2 == 0 else order[::-1]:
                    grown[name] += await burst(client, url, size)
            GROWTH[size] = grown
        GROWTH[n] = results
        await under_write_load(client, direct, via, args, db)
        # The upstream's last 2n replies are slow (20 s), so the streams stay open. The
        # first n reach the concurrency the rounds already had (memory the allocator keeps);
        # the next n are beyond it, so their RSS growth is what an open stream costs.
        started: list[int] = []
        held = [asyncio.ensure_future(one_stream(client, via, i, started)) for i in range(n)]
        await until(lambda: len(started) == n)
        idle = rss_kib(pid)
        held += [asyncio.ensure_future(one_stream(client, via, n + i, started)) for i in range(n)]
        await until(lambda: len(started) == 2 * n)
        busy = rss_kib(pid)
        sockets = len(os.listdir(f"/proc/{pid}/fd"))
        print(f"gateway file descriptors with {2 * n} streams open: {sockets}")
        # A student's question while the class is streaming: one request at a time, with
        # 2n streams flowing through the same gateway (and the same upstream, for direct).
        await one_at_a_time(client, direct, via, args.single, f"with {2 * n} streams open")
        await asyncio.gather(*held)
    report(results, own_in_rounds, n, args.rounds, idle, busy)


def report(
    results: dict[str, list[tuple[float, float]]],
    own_in_rounds: tuple[list[float], dict[str, list[float]]],
    n: int,
    rounds: int,
    idle: int,
    busy: int,
) -> None:
    print(f"hub gateway benchmark: {n} concurrent streams x {rounds} rounds, same upstream")
    rows = {}
    for name in ("direct", "gateway"):
        first = [f * 1000 for f, _ in results[name]]
        total = [t * 1000 for _, t in results[name]]
        rows[name] = (
            percentile(first, 0.5),
            percentile(first, 0.95),
            percentile(total, 0.5),
            percentile(total, 0.95),
        )
        p = rows[name]
        print(
            f"{name:8} first byte p50 {p[0]:7.2f} ms  p95 {p[1]:7.2f} ms"
            f"   whole answer p50 {p[2]:7.2f} ms  p95 {p[3]:7.2f} ms"
        )
    own, parts = own_in_rounds
    print(
        f"gateway's own work before forwarding (Server-Timing): p50 {percentile(own, 0.5):.2f} ms"
        f"  p95 {percentile(own, 0.95):.2f} ms"
    )
    for part in ("auth", "admit"):
        values = parts.get(part) or [0.0]
        print(
            f"  of which {part}: p50 {percentile(values, 0.5):.2f} ms"
            f"  p95 {percentile(values, 0.95):.2f} ms"
        )
    # The anchor is the direct upstream in the same run: the verdict is on end-to-end time (the
    # whole answer), where a difference of two p95s below 0 is noise and counts as 0, not gain.
    for size, grown in sorted(GROWTH.items()):
        d, g, plus = end_to_end(grown)
        print(
            f"end to end, {size:>3} concurrent: direct p95 {d:7.2f} ms, gateway p95 {g:7.2f} ms"
            f" = {g / d:.2f}x, added p95 {plus:.2f} ms"
        )
    # Judged on the worst size: at N the direct upstream itself may be the bottleneck (its
    # accept backlog), which would hide what the gateway adds at 1 or 10.
    worst, at = max((end_to_end(grown)[2], size) for size, grown in GROWTH.items())
    verdict = "met" if worst < 10 else "NOT met"
    print(
        f"goal p95 added < 10 ms end to end vs direct upstream at 1, 10 and {n}: {verdict} "
        f"({worst:.2f} ms at {at})"
    )
    for size, (loaded, held) in WRITE_LOAD.items():
        d, g, plus = end_to_end(loaded)
        print(
            f"end to end, {size:>3} concurrent, database under write load (another writer held "
            f"the write lock {held} times, {args_text(WRITE_ARGS)}): direct p95 {d:7.2f} ms, "
            f"gateway p95 {g:7.2f} ms, added p95 {plus:.2f} ms"
        )
    per_stream = (busy - idle) / n
    print(
        f"gateway RSS with {n} open streams {idle / 1024:.1f} MiB, {2 * n}: {busy / 1024:.1f} MiB"
    )
    print(f"memory per open stream: {per_stream:.1f} KiB")
    print(f"RESULT: p95 added {worst:.2f} ms, {per_stream:.1f} KiB a stream")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=100, help="concurrent streams")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="10 streams, 1 round")
    parser.add_argument("--single", type=int, default=50, help="one-at-a-time requests")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the gateway into FILE")
    parser.add_argument("--write-hold-ms", type=float, default=20, help="write lock held (ms)")
    parser.add_argument("--write-gap-ms", type=float, default=20, help="then let go (ms)")
    parser.add_argument("--serve-gateway", nargs=3, metavar=("PORT", "UPSTREAM", "DB"))
    parser.add_argument("--serve-upstream", nargs=3, type=int, metavar=("FAST", "SLOW", "AFTER"))
    args = parser.parse_args()
    if args.serve_gateway:
        port, upstream_url, db = args.serve_gateway
        serve_gateway(int(port), upstream_url, db)
        return 0
    if args.serve_upstream:
        serve_upstream(*args.serve_upstream)
        return 0
    if args.quick:
        args.n, args.rounds, args.single = 10, 1, 5
    fast = 2 * args.n * (args.rounds + 1) + 2 * args.single
    plans = [*growth_plan(args.n, args.rounds), write_load_plan(args.n, args.rounds)]
    fast += sum(2 * size * times for size, times in plans)
    upstream_proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve-upstream",
            str(fast),
            str(2 * args.n),
            str(2 * args.single),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert upstream_proc.stdout is not None
    upstream = upstream_proc.stdout.readline().strip()
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        child = subprocess.Popen(
            [sys.executable, __file__, "--serve-gateway", str(port), upstream, f"{tmp}/q.sqlite"],
            env={
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                **({"HUB_BENCH_PROFILE": args.profile} if args.profile else {}),
            },
            stderr=subprocess.DEVNULL,
        )
        gateway = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(f"{gateway}{PREFIX}v1/models")
                    break
                except httpx.HTTPError:
                    if child.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit("the gateway did not start") from None
                    time.sleep(0.1)
            WRITE_ARGS.update(hold=args.write_hold_ms, gap=args.write_gap_ms)
            asyncio.run(measure(args, upstream, gateway, child.pid, f"{tmp}/q.sqlite"))
        finally:
            for proc in (child, upstream_proc):
                proc.terminate()
                proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
