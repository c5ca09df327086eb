"""Knowledge-base ingest time against file size: 1, 4 and 16 MB text files (goal: linear).

One seeded generator writes a plain-text file and a Markdown file of each size (paragraphs of
Zipf-like words, a heading every few paragraphs in the Markdown one). For each, in this one run:

* **ingest_file**: reading and chunking alone (``deeptutor_jupyter.knowledge.ingest``);
* **add_sources**: end to end into a fresh knowledge base (chunk, tokenise, index, write).

Each figure is the median of three runs, in wall time and, beside it, in process CPU time
(on a shared machine the wall clock of a one-second run swings with the load; the CPU time
shows the work itself).

The goal is linear growth: the 16 MB file at most 4.2x the 4 MB one (issue 28; the ratios
printed last).
Quadratic chunking (counting newlines from the start of the file for every piece) showed up
here as 1 MB 0.5 s, 8 MB 15 s.

Usage::

    .venv/bin/python benchmarks/kb_ingest.py            # 1, 4, 16 MB
    .venv/bin/python benchmarks/kb_ingest.py --quick    # 64 kB, 256 kB, 1 MB (smoke test)
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from deeptutor_jupyter.knowledge import KnowledgeBase, ingest_file  # noqa: E402

REPEAT = 3


def write_text(path: Path, size: int, *, markdown: bool, seed: int = 3) -> None:
    """About ``size`` bytes of paragraphs; deterministic for a given seed."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    weights = [1 / (rank + 1) for rank in range(len(vocab))]
    parts: list[str] = []
    written = n = 0
    while written < size:
        if markdown and n % 5 == 0:
            parts.append(f"## Section {n // 5}\n\n")
        lines = [
            " ".join(rng.choices(vocab, weights=weights, k=12)) for _ in range(rng.randint(2, 8))
        ]
        parts.append("\n".join(lines) + "\n\n")
        written += len(parts[-1])
        n += 1
    path.write_text("".join(parts)[:size], encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 kB, 256 kB, 1 MB")
    args = parser.parse_args()
    sizes = [64 << 10, 256 << 10, 1 << 20] if args.quick else [1 << 20, 4 << 20, 16 << 20]
    print(f"kb ingest benchmark: {', '.join(f'{s / 2**20:g} MB' for s in sizes)}")
    results: dict[tuple[str, int], float] = {}
    cpu: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory(prefix="kb-ingest-") as tmp:
        root = Path(tmp)
        for suffix in (".txt", ".md"):
            for size in sizes:
                src = root / f"f{size}{suffix}"
                write_text(src, size, markdown=suffix == ".md")
                reads, totals, cpus = [], [], []
                for attempt in range(REPEAT):  # medians: the machine is shared
                    start = time.perf_counter()
                    chunks = ingest_file(src, root, "bench")
                    reads.append(time.perf_counter() - start)
                    home = root / f"home{size}{suffix}{attempt}"
                    kb = KnowledgeBase(home, "bench", root=root)
                    start, start_cpu = time.perf_counter(), time.process_time()
                    report = kb.add_sources([src])
                    totals.append(time.perf_counter() - start)
                    cpus.append(time.process_time() - start_cpu)
                read_s, total_s = statistics.median(reads), statistics.median(totals)
                assert report.added == 1 and not report.errors, report.summary()
                results[(suffix, size)] = total_s
                cpu[(suffix, size)] = statistics.median(cpus)
                print(
                    f"  {suffix:4} {size / 2**20:6.2f} MB: ingest_file {read_s * 1000:9.1f} ms"
                    f" ({len(chunks)} chunks), add_sources {total_s * 1000:9.1f} ms"
                    f" (CPU {cpu[(suffix, size)] * 1000:.1f} ms)"
                )
    for suffix in (".txt", ".md"):
        ratio = results[(suffix, sizes[2])] / results[(suffix, sizes[1])]
        cpu_ratio = cpu[(suffix, sizes[2])] / cpu[(suffix, sizes[1])]
        factor = sizes[2] // sizes[1]
        goal = factor * 1.05  # issue 28: 4.2x for 4x the bytes
        verdict = "PASS" if ratio <= goal else "FAIL"
        print(
            f"RESULT: {suffix} add_sources {sizes[2] / 2**20:g} MB / {sizes[1] / 2**20:g} MB = "
            f"{ratio:.2f}x, CPU {cpu_ratio:.2f}x (goal <= {goal:.1f}x, linear; the anchor is "
            f"the {sizes[1] / 2**20:g} MB file of this run): {verdict}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
