"""Memory store costs: L1 append throughput and reading an L3 document of 10,000 entries.

* **L1 append**: ``MemoryStore.emit`` one record at a time into a fresh home (lock, dedupe check
  against the incremental id index, one ``O_APPEND`` write), with and without ``fsync``; also
  ``emit_many`` (the notebook import path). Printed as records/s.
* **L3 read**: ``profile.md`` with 10,000 footnoted entries over 20 sections; median and p90 of
  ``read`` (parse), ``read_text``, ``read_l3_concat`` and ``system_prompt_block``.

Usage::

    .venv/bin/python benchmarks/memory.py            # 5,000 appends, 10,000 entries, 15 reads
    .venv/bin/python benchmarks/memory.py --quick    # small sizes (smoke test)

Timings are from one run on one machine: compare the lines of the same run, not across runs.
"""

from __future__ import annotations

import argparse
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


def timings(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.9))]


def l3_document(entries: int) -> str:
    sections = [Section(f"Topic {s}") for s in range(20)]
    for i in range(entries):
        refs = [f"t_{i:08d}", f"t_{i // 10:08d}"]
        text = f"Learner fact {i}: confuses chain rule with product rule in case {i % 13}"
        sections[i % 20].entries.append(Entry(f"e{i:06d}", text, refs))
    return render(Document(sections))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=5000)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("-n", "--repeat", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="small sizes, for the smoke test")
    args = parser.parse_args()
    if args.quick:
        args.appends, args.entries, args.repeat = 200, 500, 3

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

    with tempfile.TemporaryDirectory() as home:
        store = MemoryStore(Path(home))
        store.overwrite("L3", "profile", l3_document(args.entries))
        size = store.path("L3", "profile").stat().st_size
        doc = store.read("L3", "profile")
        assert len(doc.entries()) == args.entries
        print(f"  L3 profile.md: {args.entries} entries, {size / 1024:,.0f} KiB")
        for label, fn in [
            ("L3 read_text", lambda: store.read_text("L3", "profile")),
            ("L3 read (parse)", lambda: store.read("L3", "profile")),
            ("L3 read_l3_concat", store.read_l3_concat),
            ("L3 system_prompt_block", store.system_prompt_block),
        ]:
            median, p90 = timings(fn, args.repeat)
            print(f"  {label}, {args.entries} entries: median {median:.1f} ms, p90 {p90:.1f} ms")
    print("RESULT: done")


if __name__ == "__main__":
    main()
