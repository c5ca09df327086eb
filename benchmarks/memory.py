"""Memory store costs: L1 append throughput and reading an L3 document of 10,000 entries.

* **L1 append**: ``MemoryStore.emit`` one record at a time into a fresh home (lock, dedupe check
  against the incremental id index, one ``O_APPEND`` write), with and without ``fsync``; also
  ``emit_many`` (the notebook import path). Printed as records/s.
* **L1 append with history**: ``emit`` rate into a home that already holds 0 and H traces
  (default 50,000), each time through a fresh ``MemoryStore`` as a new kernel would, and the
  steady rate after that; the goal is flat (the same rate whatever the history).
* **L3 read**: ``profile.md`` with 10,000 footnoted entries over 20 sections; median and p90 of
  ``read`` (parse), ``read_text``, ``read_l3_concat`` and ``system_prompt_block`` (the goal: the
  parse under 20 ms, or cached by file stamp; ``system_prompt_block`` is paid every turn).
* **merge**: deterministic consolidation of an L3 document of 10,000 entries, a tenth of them
  duplicates (goal: under 2 s).

Usage::

    .venv/bin/python benchmarks/memory.py            # 5,000 appends, 50,000 history, 10,000 entries
    .venv/bin/python benchmarks/memory.py --quick    # small sizes (smoke test)

Timings are from one run on one machine: compare the lines of the same run, not across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from deeptutor_jupyter.memory import (  # noqa: E402
    Document,
    Entry,
    MemoryStore,
    Section,
    TraceRecord,
    new_trace_id,
    parse,
    render,
)


def record(i: int) -> TraceRecord:
    now = 1_760_000_000.0 + i
    return TraceRecord(
        trace_id=f"t_{i:08d}",
        session_id="bench",
        turn_id=str(i),
        model="fake",
        started_at=now,
        finished_at=now + 2,
        question=f"What is the derivative of x^{i % 7}?",
        answer_summary="The power rule: bring the exponent down and lower it by one. " * 3,
        tools=["calculate"],
    )


def append_rate(n: int, *, fsync: bool, batch: bool) -> float:
    records = [record(i) for i in range(n)]
    with tempfile.TemporaryDirectory() as home:
        store = MemoryStore(Path(home), fsync_traces=fsync)
        start = time.perf_counter()
        if batch:
            store.emit_many(records)
        else:
            for item in records:
                store.emit(item)
        elapsed = time.perf_counter() - start
        assert len(store.traces()) == n
    return n / elapsed


def first_append_ms(history: int, samples: int = 5) -> float:
    """Median ms of the very first emit of a fresh store (a new kernel's first turn)."""
    times = []
    with tempfile.TemporaryDirectory() as home:
        if history:
            MemoryStore(Path(home)).emit_many(record(i) for i in range(history))
        for i in range(samples):
            store = MemoryStore(Path(home))
            item = record(history + i).model_copy(update={"trace_id": new_trace_id()})
            start = time.perf_counter()
            store.emit(item)
            times.append((time.perf_counter() - start) * 1000)
    return sorted(times)[len(times) // 2]


def append_rate_with_history(history: int, n: int) -> tuple[float, float]:
    """(records/s of the first n appends by a fresh store, records/s of the next n)."""
    with tempfile.TemporaryDirectory() as home:
        if history:
            MemoryStore(Path(home)).emit_many(record(i) for i in range(history))
        store = MemoryStore(Path(home))  # a new kernel: nothing cached yet
        # A turn's trace, as plan.py makes it: an id minted by this process (new_trace_id).
        new = [
            record(history + i).model_copy(update={"trace_id": new_trace_id()})
            for i in range(2 * n)
        ]
        start = time.perf_counter()
        for item in new[:n]:
            store.emit(item)
        first = time.perf_counter() - start
        start = time.perf_counter()
        for item in new[n:]:
            store.emit(item)
        steady = time.perf_counter() - start
    return n / first, n / steady


def merge_time(entries: int) -> float:
    from deeptutor_jupyter.memory.consolidate import consolidate

    with tempfile.TemporaryDirectory() as home:
        store = MemoryStore(Path(home))
        text = l3_document(entries, duplicates=entries // 10)
        store.overwrite("L3", "profile", text)
        start = time.perf_counter()
        result = asyncio.run(consolidate(store, None, layer="L3", key="profile", mode="merge"))
        elapsed = time.perf_counter() - start
        after = len(store.read("L3", "profile").entries())
        assert after == entries - entries // 10, (after, len(result.ops_applied))
    return elapsed


def timings(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.9))]


def l3_document(entries: int, duplicates: int = 0) -> str:
    """``entries`` bullets; the last ``duplicates`` repeat earlier texts (for ``merge``)."""
    sections = [Section(f"Topic {s}") for s in range(20)]
    for i in range(entries):
        refs = [f"t_{i:08d}", f"t_{i // 10:08d}"]
        n = i - (entries - duplicates) if i >= entries - duplicates else i
        text = f"Learner fact {n}: confuses chain rule with product rule in case {n % 13}"
        sections[i % 20].entries.append(Entry(f"e{i:06d}", text, refs))
    return render(Document(sections))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=5000)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--history", type=int, default=50_000)
    parser.add_argument("--merge", type=int, default=10_000, help="entries for merge")
    parser.add_argument("-n", "--repeat", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="small sizes, for the smoke test")
    args = parser.parse_args()
    if args.quick:
        args.appends, args.entries, args.repeat = 200, 500, 3
        args.history, args.merge = 2000, 500

    print("memory benchmark:")
    print(
        f"  L1 append, emit (no fsync), {args.appends} records: "
        f"{append_rate(args.appends, fsync=False, batch=False):,.0f} records/s"
    )
    fsync_n = max(args.appends // 10, 20)
    print(
        f"  L1 append, emit (fsync), {fsync_n} records: "
        f"{append_rate(fsync_n, fsync=True, batch=False):,.0f} records/s"
    )
    print(
        f"  L1 append, emit_many (no fsync), {args.appends} records: "
        f"{append_rate(args.appends, fsync=False, batch=True):,.0f} records/s"
    )

    n = min(args.appends, 1000)
    empty_first, empty_steady = append_rate_with_history(0, n)
    full_first, full_steady = append_rate_with_history(args.history, n)
    print(
        f"  L1 append, {n} emits with 0 traces already: {empty_first:,.0f} records/s "
        f"(then {empty_steady:,.0f})"
    )
    print(
        f"  L1 append, {n} emits with {args.history} traces already: {full_first:,.0f} records/s "
        f"(then {full_steady:,.0f})"
    )
    print(
        f"  L1 append ratio, {args.history} vs 0 traces: {full_steady / empty_steady:.2f}x "
        f"steady, {full_first / empty_first:.2f}x first {n} (goal: flat, about 1x)"
    )

    firsts = {
        h: first_append_ms(h) for h in (0, args.history // 100, args.history // 10, args.history)
    }
    print(
        "  L1 first append of a fresh store (a new kernel's first turn), median of 5: "
        + ", ".join(f"{ms:.2f} ms at {h:,} traces" for h, ms in firsts.items())
        + f" ({firsts[args.history] / firsts[0]:.2f}x at {args.history:,} vs 0; goal O(1))"
    )

    with tempfile.TemporaryDirectory() as home:
        store = MemoryStore(Path(home))
        store.overwrite("L3", "profile", l3_document(args.entries))
        size = store.path("L3", "profile").stat().st_size
        doc = store.read("L3", "profile")
        assert len(doc.entries()) == args.entries
        print(f"  L3 profile.md: {args.entries} entries, {size / 1024:,.0f} KiB")
        for label, fn in [
            ("L3 read_text", lambda: store.read_text("L3", "profile")),
            ("L3 parse only (no cache)", lambda: parse(store.read_text("L3", "profile"))),
            ("L3 read (parse)", lambda: store.read("L3", "profile")),
            ("L3 read_l3_concat", store.read_l3_concat),
            ("L3 system_prompt_block", store.system_prompt_block),
        ]:
            median, p90 = timings(fn, args.repeat)
            print(f"  {label}, {args.entries} entries: median {median:.1f} ms, p90 {p90:.1f} ms")
    merge_s = merge_time(args.merge)
    print(f"  merge, {args.merge} entries: {merge_s * 1000:,.0f} ms (goal < 2000 ms at 10,000)")
    print("RESULT: done")


if __name__ == "__main__":
    main()
