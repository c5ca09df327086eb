"""Knowledge-base indexing and query speed against ``rank-bm25`` on the same corpus.

A seeded generator writes N Markdown documents (default 1,000; a few sections each, Zipf-like
word frequencies over a synthetic vocabulary plus topic words) to a temp dir. Then, in this one
run:

* **ours, index**: ``KnowledgeBase.add_sources`` end to end: read, chunk by heading, hash,
  tokenise, build the bm25s index, write it with checksums;
* **bm25s, index only**: ``bm25s.BM25().index`` on the chunks' tokens, for the share of the above;
* **rank-bm25, index**: ``BM25Okapi`` over exactly the same token lists;
* **query**: the same queries (2-4 words taken from random chunks) through
  ``KnowledgeBase.search(q, k=5)`` (tokenise, score, top-k, Hit objects) and through rank-bm25
  (tokenise with our tokenizer, ``get_scores``, top-k with numpy), interleaved so drift on a
  busy machine hits both alike. p50 and p95 of each, and their ratio against the 10x goal.

It also reports how often both put the same chunk first (they score with different BM25
variants, lucene vs Okapi, so a few differ).

Usage::

    .venv/bin/python benchmarks/kb.py              # 1,000 documents, 300 queries
    .venv/bin/python benchmarks/kb.py --quick      # 100 documents, 30 queries (smoke test)
    .venv/bin/python benchmarks/kb.py -n 5000 --queries 500
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

import numpy as np  # noqa: E402

from deeptutor_jupyter.knowledge import KnowledgeBase, tokenize  # noqa: E402
from deeptutor_jupyter.knowledge.storage import iter_chunks  # noqa: E402

TOPICS = [
    "loops", "recursion", "matrices", "probability", "gradient", "sorting", "graphs",
    "dictionaries", "regression", "integrals", "vectors", "classes", "closures", "hashing",
    "eigenvalues", "derivatives", "queues", "trees", "entropy", "sampling",
]  # fmt: skip


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)}
    return sorted(words)


def generate_corpus(folder: Path, n_docs: int, seed: int = 7) -> None:
    """N Markdown files, deterministic for a given seed."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 6000)
    weights = [1 / (rank + 1) for rank in range(len(vocab))]  # Zipf-like, as in real text
    folder.mkdir(parents=True, exist_ok=True)
    for doc in range(n_docs):
        topic = TOPICS[doc % len(TOPICS)]
        lines = [f"# {topic.title()} notes {doc}", ""]
        for section in range(rng.randint(2, 5)):
            lines += [f"## {topic} part {section} {rng.choice(vocab)}", ""]
            words = rng.choices(vocab, weights=weights, k=rng.randint(40, 160))
            words += [topic] * rng.randint(1, 4)
            rng.shuffle(words)
            lines += [" ".join(words), ""]
        (folder / f"doc{doc:05d}.md").write_text("\n".join(lines), encoding="utf-8")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000, help="documents (default 1000)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="100 documents, 30 queries")
    args = parser.parse_args()
    n_docs, n_queries = (100, 30) if args.quick else (args.n, args.queries)
    from rank_bm25 import BM25Okapi

    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        corpus, home = Path(tmp) / "corpus", Path(tmp) / "home"
        generate_corpus(corpus, n_docs)
        kb = KnowledgeBase(home, "bench", root=Path(tmp))
        start = time.perf_counter()
        report = kb.add_sources([corpus])
        ours_index = time.perf_counter() - start
        chunks = list(iter_chunks(kb.folder))  # in index order: row i is chunks[i]
        tokens = [tokenize(f"{c.title}\n{c.text}") for c in chunks]
        import bm25s  # type: ignore[import-untyped]

        start = time.perf_counter()
        bm25s.BM25().index(tokens, show_progress=False)
        bm25s_index = time.perf_counter() - start
        start = time.perf_counter()
        okapi = BM25Okapi(tokens)
        rank_index = time.perf_counter() - start

        rng = random.Random(11)
        queries = []
        for _ in range(n_queries):
            words = tokens[rng.randrange(len(tokens))]
            queries.append(" ".join(rng.sample(words, min(len(words), rng.randint(2, 4)))))
        for q in queries[:5]:  # warm-up: first-call costs are not query costs
            kb.search(q)
            okapi.get_scores(tokenize(q))

        ours_t: list[float] = []
        rank_t: list[float] = []
        agree = 0
        for q in queries:
            start = time.perf_counter()
            hits = kb.search(q, k=5)
            ours_t.append(time.perf_counter() - start)
            start = time.perf_counter()
            scores = okapi.get_scores(tokenize(q))
            top = np.argpartition(-scores, 4)[:5]
            top = top[np.argsort(-scores[top])]
            rank_t.append(time.perf_counter() - start)
            if hits and chunks[int(top[0])].chunk_id == hits[0].chunk.chunk_id:
                agree += 1

    print(f"kb benchmark: {n_docs} documents, {len(chunks)} chunks, {n_queries} queries")
    print(f"  report: {report.summary()}")
    print(f"  index, ours (read+chunk+hash+bm25s+write): {_ms(ours_index)}")
    print(f"  index, bm25s only (same tokens):           {_ms(bm25s_index)}")
    print(f"  index, rank-bm25 BM25Okapi (same tokens):  {_ms(rank_index)}")
    print(f"  index ratio ours / bm25s only: {ours_index / bm25s_index:.2f}x (goal < 1.5x)")
    p50_o, p95_o = statistics.median(ours_t), _pct(ours_t, 0.95)
    p50_r, p95_r = statistics.median(rank_t), _pct(rank_t, 0.95)
    print(f"  query, ours KnowledgeBase.search k=5:  p50 {_ms(p50_o)}  p95 {_ms(p95_o)}")
    print(f"  query, rank-bm25 get_scores + top 5:   p50 {_ms(p50_r)}  p95 {_ms(p95_r)}")
    ratio50, ratio95 = p50_r / p50_o, p95_r / p95_o
    print(f"  speed-up (rank-bm25 / ours): p50 {ratio50:.1f}x, p95 {ratio95:.1f}x")
    print(f"  same top chunk in both: {agree}/{n_queries}")
    verdict = "PASS" if min(ratio50, ratio95) >= 10 else "FAIL"
    print(f"RESULT: goal queries >= 10x faster than rank-bm25: {verdict} ({ratio50:.1f}x p50)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
