# ruff: noqa: E501
"""Knowledge-base costs that grow with use: refresh, first search, listing, memory.

The corpus is ``benchmarks/kb.py``'s seeded Markdown generator (N short files, default 1,000).
In one run, each line beside its floor or goal:

* **full index**: ``add_sources`` of the whole folder; the floor is ``bm25s.BM25.index`` on the
  same chunks' tokens (goal: under 1.5x);
* **refresh, nothing changed** (goal: well under 1 s; stat first, hash only what changed),
  twice: the first one after indexing also checks every index file and the chunk store
  against their checksums and records their stamps; the next trusts those stamps;
* **refresh, one file changed**, and one added + one removed, as a share of the full index
  (goal: under 5%);
* **first search** in a fresh ``KnowledgeBase`` object: open, verify, score (goal: under 0.5 s);
* **list_kbs** with this knowledge base, beside ``list_kbs`` with a one-file one (goal: about
  the same, i.e. independent of the size);
* **peak RSS** of this process after indexing (``ru_maxrss``), beside the RSS before it.

Usage::

    .venv/bin/python benchmarks/kb_refresh.py              # 1,000 files
    .venv/bin/python benchmarks/kb_refresh.py -n 10000     # the issue's 10,000-file row
    .venv/bin/python benchmarks/kb_refresh.py --quick      # 200 files (smoke test)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from kb import generate_corpus  # type: ignore[import-not-found]  # noqa: E402

from deeptutor_jupyter.knowledge import KnowledgeBase, list_kbs, tokenize  # noqa: E402


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def _touch(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    later = time.time_ns() + 2_000_000_000  # a different mtime even on coarse clocks
    os.utime(path, ns=(later, later))


def _chunk_texts(kb: KnowledgeBase) -> list[str]:
    """title + text of every chunk, in index order."""
    from deeptutor_jupyter.knowledge.storage import iter_chunks

    return [f"{c.title}\n{c.text}" for c in iter_chunks(kb.folder)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000, help="files (default 1000)")
    parser.add_argument("--quick", action="store_true", help="200 files")
    args = parser.parse_args()
    n_files = 200 if args.quick else args.n
    import bm25s  # type: ignore[import-untyped]

    with tempfile.TemporaryDirectory(prefix="kb-refresh-") as tmp:
        corpus, home = Path(tmp) / "corpus", Path(tmp) / "home"
        generate_corpus(corpus, n_files)
        small = Path(tmp) / "small"
        generate_corpus(small, 1, seed=9)
        KnowledgeBase(Path(tmp) / "home-small", "small", root=Path(tmp)).add_sources([small])
        rss_before = _rss_mb()
        kb = KnowledgeBase(home, "bench", root=Path(tmp))
        full, report = _timed(lambda: kb.add_sources([corpus]))
        rss_after = _rss_mb()
        texts = _chunk_texts(kb)
        tokens = [tokenize(t) for t in texts]
        floor = statistics.median(
            _timed(lambda: bm25s.BM25().index(tokens, show_progress=False))[0] for _ in range(3)
        )
        tokenize_s = _timed(lambda: [tokenize(t) for t in texts])[0]

        time.sleep(2.1)  # older than a file-system clock tick: stamps can be recorded
        first_nothing = _timed(kb.refresh)[0]
        nothing, r_nothing = _timed(kb.refresh)
        files = sorted(corpus.glob("*.md"))
        _touch(files[len(files) // 2], "# Changed\n\nentirely new words about gradient descent\n")
        one, r_one = _timed(kb.refresh)
        _touch(corpus / "zz-new.md", "# Added\n\nfresh material about eigenvalues\n")
        files[0].unlink()
        add_remove, r_ar = _timed(kb.refresh)
        first_search, hits = _timed(
            lambda: KnowledgeBase(home, "bench").search("gradient descent", k=5)
        )
        again = statistics.median(
            _timed(lambda: kb.search("eigenvalues loops"))[0] for _ in range(5)
        )
        list_big = statistics.median(_timed(lambda: list_kbs(home))[0] for _ in range(5))
        list_small = statistics.median(
            _timed(lambda: list_kbs(Path(tmp) / "home-small"))[0] for _ in range(5)
        )

    ms = lambda s: f"{s * 1000:9.1f} ms"  # noqa: E731
    rows = [
        ("full index (add_sources)", f"{ms(full)}  ({report.summary()})"),
        ("floor, bm25s.BM25.index same tokens", f"{ms(floor)}  ratio {full / floor:.2f}x (goal < 1.5x)"),
        ("our tokenizer over all chunks", f"{ms(tokenize_s)}  ({tokenize_s / full:.0%} of the full index)"),
        ("refresh, nothing changed, first", f"{ms(first_nothing)}  (checks every index file and the store)"),
        ("refresh, nothing changed", f"{ms(nothing)}  (goal < 1000 ms; {r_nothing.summary()})"),
        ("refresh, one file changed", f"{ms(one)}  {one / full:.1%} of full (goal < 5%; {r_one.summary()})"),
        ("refresh, one added + one removed", f"{ms(add_remove)}  {add_remove / full:.1%} of full ({r_ar.summary()})"),
        ("first search, fresh KnowledgeBase", f"{ms(first_search)}  (goal < 500 ms; {len(hits)} hits)"),
        ("search again (warm), median", ms(again)),
        ("list_kbs, this KB", f"{ms(list_big)}  vs one-file KB {ms(list_small)}"),
        ("peak RSS", f"{rss_before:,.0f} MB before indexing, {rss_after:,.0f} MB after"),
    ]  # fmt: skip
    print(f"kb refresh benchmark: {n_files} files, {report.chunks} chunks")
    for label, value in rows:
        print(f"  {label + ':':38} {value}")
    ok = one / full < 0.05 and nothing < 1.0 and full / floor < 1.5 and first_search < 0.5
    print(
        f"RESULT: refresh of one file {one / full:.1%} of a full index, "
        f"index {full / floor:.2f}x bm25s: {'PASS' if ok else 'FAIL'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
