"""Bytes a streamed answer adds to state.db on the real path (issue 14 row 2, issue 28 row 3).

A real ``TutorSession`` (its ``Store`` in a temp home) asks a ``FakeLLMServer`` that streams an
answer of ``--chars`` characters as token-like deltas (1-8 random letters and a space: random
text, so zlib gains less than on prose). Every turn ends as in a kernel: the ``done`` event with
its answer, the ``turns`` row, the history ``messages``, the content runs. The growth of the
database file (``page_count * page_size`` after a WAL checkpoint) is measured after 1, 10 and 100
answers, beside the anchor from the same run: the answers' own size. Goal: at most 2x.

    .venv/bin/python benchmarks/event_rows.py [--chars 20000] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.runtime.session import AskOptions, TutorSession
from deeptutor_jupyter.store.db import Store
from deeptutor_jupyter.testing import FakeLLMServer, Reply

GOAL = 2.0


def deltas_of(chars: int) -> list[str]:
    rnd, out, size = random.Random(28), [], 0
    while size < chars:
        word = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(0, 7)))
        out.append(word + " ")
        size += len(word) + 1
    return out


def db_bytes(path: Path) -> int:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        return int(pages * db.execute("PRAGMA page_size").fetchone()[0])


async def run(chars: int, steps: list[int]) -> None:
    deltas = deltas_of(chars)
    answer = "".join(deltas)
    total = steps[-1]
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeLLMServer([Reply(text="Warm."), *[Reply(chunks=deltas)] * (3 * total + 10)]) as server,
    ):
        os.environ.update(
            DEEPTUTOR_HOME=str(Path(tmp) / "home"),
            DEEPTUTOR_PROVIDER="custom",
            DEEPTUTOR_BASE_URL=server.url,
            DEEPTUTOR_MODEL="fake",
        )
        session = TutorSession("bench.ipynb", resolve=lambda f: resolve_settings(flags=f))
        resolved = session.resolve({})
        warm = session.ask("Hello", resolved, AskOptions())
        assert warm.task is not None
        await warm.task
        path = Path(tmp) / "home" / "state.db"
        base = db_bytes(path)
        print(f"event rows benchmark: answers of {len(answer):,} chars in {len(deltas):,} deltas")
        print(f"anchor: the answer itself, {len(answer):,} bytes; goal <= {GOAL:.0f}x")
        done, ratios, last = 0, [], None
        start = time.perf_counter()
        for step in steps:
            while done < step:
                last = session.ask(f"Question {done}", resolved, AskOptions())
                assert last.task is not None
                await last.task
                errors = [e.fields() for e in last.log.events if e.body.type == "error"]
                assert last.answer == answer, (last.status, errors)
                done += 1
            grown = db_bytes(path) - base
            ratio = grown / (len(answer) * step)
            ratios.append(ratio)
            print(
                f"  after {step:>3} answers: state.db +{grown:,} bytes = "
                f"{grown / step:,.0f} per answer = {ratio:.2f}x the answer"
            )
        elapsed = time.perf_counter() - start
        for model in session.models.values():
            await model.aclose()
        assert last is not None
        store = Store(path)
        try:
            replayed = store.events(last.turn_id)
            exact = [(s, t, d) for s, t, d in replayed] == [
                (e.seq, e.body.type, e.fields()) for e in last.log.events
            ]
            row = store.get_turn(last.turn_id)
            exact = exact and row is not None and row.answer == answer
            exact = exact and replayed[-1][2].get("answer") == answer
        finally:
            store.close()
    growth = ratios[-1] / ratios[0]
    print(f"growth per answer, {steps[-1]} vs {steps[0]} answers: {growth:.2f}x (goal: flat)")
    print(
        f"{done} turns in {elapsed:.1f} s; replay exact (events, done.answer, turn): "
        f"{'yes' if exact else 'NO'}"
    )
    ok = exact and max(ratios) <= GOAL
    print(f"RESULT: {'PASS' if ok else 'FAIL'} {max(ratios):.2f}x the answer")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--chars", type=int, default=20_000)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    if a.quick:
        asyncio.run(run(4_000, [1, 3]))
    else:
        asyncio.run(run(a.chars, [1, 10, 100]))


if __name__ == "__main__":
    main()
