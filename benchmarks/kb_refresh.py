# ruff: noqa: E501
"""Knowledge-base costs that grow with use: refresh, first search, listing, memory.

The corpus is ``benchmarks/kb.py``'s seeded Markdown generator (N short files, default 1,000).
In one run, each line beside its floor or goal:

* **full index**: ``add_sources`` of the whole folder, the anchor every refresh is a share of;
  beside it, for reference only, ``bm25s.BM25.index`` on the same chunks' tokens (no longer a
  floor: it chunks and writes nothing). Both are medians of ``--rounds`` runs (default 3,
  1 above 10,000 files), taken in turn so that load on a shared machine hits both alike;
* **refresh, nothing changed** (goal: well under 1 s; stat first, hash only what changed),
  twice: the first one after indexing also checks every index file and the chunk store
  against their checksums and records their stamps; the next trusts those stamps;
* **refresh, one file changed**, and one added + one removed, as a share of the full index
  (goal: under 5%), then 10 and 100 files changed (how the cost grows with what changed),
  in both ways a refresh can be told what to look at: ``refresh(paths=[the file])`` (the
  caller knows what changed: a save, a watcher; it stats those paths and reads and writes
  the pieces of the file table holding them) and ``refresh()`` (a full pass: every file
  stat-ed, only the changed pieces written).
  The one-file figure is the median of ``--samples`` refreshes (default 9),
  each changing another file and each starting, as a learner's edit does, from an index
  last written more than 2 s before and checked since (settled stamps). Beside it, the same
  share in process CPU time: on a shared machine a 20 ms refresh is hit by load far more
  unevenly than a full index, and CPU time shows the work itself (the goal is the wall clock);
* **first search** in a fresh ``KnowledgeBase`` object: open, verify, score (goal: under 0.5 s);
* **list_kbs** with this knowledge base, beside ``list_kbs`` with a one-file one (goal: about
  the same, i.e. independent of the size);
* **peak RSS** of this process after indexing (``ru_maxrss``), beside the RSS before it;
* with ``--growth 1000,10000,50000``: for each corpus size, in this same run, the full index
  and the one-file refresh both ways (median of ``--samples``), each beside the smallest
  size's, the anchor: the issue's "grows with what changed, not with the corpus".

Everything is written under a temporary folder beside the learner's tutor home
(``$DEEPTUTOR_HOME``'s parent, ``~`` by default): the file system knowledge bases live on.
``--dir`` runs elsewhere (``--dir /tmp``: on this project's CI machine, creating a file in /tmp
costs ~0.2-0.5 ms against ~0.02 ms in ``~``, and a refresh creates two).

Usage::

    .venv/bin/python benchmarks/kb_refresh.py              # 1,000 files
    .venv/bin/python benchmarks/kb_refresh.py -n 10000     # the issue's 10,000-file row
    .venv/bin/python benchmarks/kb_refresh.py --quick      # 200 files (smoke test)
    .venv/bin/python benchmarks/kb_refresh.py --growth 1000,10000,50000 --samples 5
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


CPU: dict[str, list[float]] = {"full": [], "one": [], "path": []}  # process CPU seconds


def _timed(fn, cpu: str = ""):  # type: ignore[no-untyped-def]
    start, start_cpu = time.perf_counter(), time.process_time()
    value = fn()
    if cpu:
        CPU[cpu].append(time.process_time() - start_cpu)
    return time.perf_counter() - start, value


def _beside_home() -> Path | None:
    """The folder holding the learner's tutor home, if it can be written (else the temp dir)."""
    from deeptutor_jupyter.config import _default_home

    parent = _default_home().parent
    return parent if os.access(parent, os.W_OK) else None


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
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: beside the tutor home)"
    )
    parser.add_argument(
        "--rounds", type=int, default=0, help="full indexes (default 3, 1 above 10,000 files)"
    )
    parser.add_argument("--samples", type=int, default=9, help="one-file refreshes (median)")
    parser.add_argument(
        "--growth", default="", help="corpus sizes, e.g. 1000,10000,50000: the growth table only"
    )
    args = parser.parse_args()
    if args.growth:
        return growth([int(n) for n in args.growth.split(",")], args)
    n_files = 200 if args.quick else args.n
    if args.quick:  # a smoke test: every line once, quickly
        args.rounds, args.samples = args.rounds or 1, 2
    args.rounds = args.rounds or (3 if n_files <= 10_000 else 1)
    import bm25s  # type: ignore[import-untyped]

    where = args.dir or _beside_home()
    with tempfile.TemporaryDirectory(prefix=".deeptutor-kb-refresh-", dir=where) as tmp:
        corpus, home = Path(tmp) / "corpus", Path(tmp) / "home"
        generate_corpus(corpus, n_files)
        small = Path(tmp) / "small"
        generate_corpus(small, 1, seed=9)
        KnowledgeBase(Path(tmp) / "home-small", "small", root=Path(tmp)).add_sources([small])
        rss_before = _rss_mb()
        # Full index and floor taken in turn, so that load on the machine hits both alike;
        # each full index goes to a fresh home (the last one is refreshed below).
        fulls, floors = [], []
        tokens: list[list[str]] = []
        texts: list[str] = []
        for i in range(args.rounds):
            kb = KnowledgeBase(home / str(i), "bench", root=Path(tmp))
            seconds, report = _timed(lambda kb=kb: kb.add_sources([corpus]), "full")
            fulls.append(seconds)
            if not tokens:
                rss_after = _rss_mb()
                texts = _chunk_texts(kb)
                tokens = [tokenize(t) for t in texts]
            floors.append(_timed(lambda t=tokens: bm25s.BM25().index(t, show_progress=False))[0])
        full, floor = statistics.median(fulls), statistics.median(floors)
        tokenize_s = _timed(lambda: [tokenize(t) for t in texts])[0]

        time.sleep(2.1)  # older than a file-system clock tick: stamps can be recorded
        first_nothing = _timed(kb.refresh)[0]
        nothing, r_nothing = _timed(kb.refresh)
        files = sorted(corpus.glob("*.md"))
        ones = []
        for i in range(args.samples):
            # As a learner's edit comes: long after the last refresh, whose files are settled.
            if i:
                time.sleep(2.1)
                kb.refresh()
            text = f"# Changed\n\nentirely new words about gradient descent {i}\n"
            _touch(files[(len(files) // 2 + 7 * i) % len(files)], text)
            seconds, r_one = _timed(kb.refresh, "one")
            ones.append(seconds)
        one = statistics.median(ones)
        paths_one = []
        for i in range(args.samples):
            time.sleep(2.1)
            kb.refresh()
            changed = files[(len(files) // 3 + 7 * i) % len(files)]
            _touch(changed, f"# Changed\n\nnew words about eigenvalues {i}\n")
            seconds, r_path = _timed(lambda c=changed: kb.refresh(paths=[c]), "path")
            paths_one.append(seconds)
        path_one = statistics.median(paths_one)
        # How a refresh grows with what changed: 10 and 100 files (capped at a tenth of the
        # corpus), each a share of the full index of the same corpus, the anchor.
        many: dict[int, float] = {1: one}
        many_paths: dict[int, float] = {1: path_one}
        for count in (10, 100):
            if count > max(len(files) // 10, 10):
                continue
            for way in ("full", "paths"):
                time.sleep(2.1)
                kb.refresh()
                batch = [files[(3 + 11 * j + (way == "paths")) % len(files)] for j in range(count)]
                for j, path in enumerate(batch):
                    _touch(path, f"# Batch\n\nrewritten {way} {count} {j}\n")
                if way == "full":
                    many[count] = _timed(kb.refresh)[0]
                else:
                    many_paths[count] = _timed(lambda b=batch: kb.refresh(paths=b))[0]
        time.sleep(2.1)
        kb.refresh()
        _touch(corpus / "zz-new.md", "# Added\n\nfresh material about eigenvalues\n")
        files[0].unlink()
        add_remove, r_ar = _timed(kb.refresh)
        last = home / str(args.rounds - 1)
        first_search, hits = _timed(
            lambda: KnowledgeBase(last, "bench").search("gradient descent", k=5)
        )
        again = statistics.median(
            _timed(lambda: kb.search("eigenvalues loops"))[0] for _ in range(5)
        )
        list_big = statistics.median(_timed(lambda: list_kbs(last))[0] for _ in range(5))
        list_small = statistics.median(
            _timed(lambda: list_kbs(Path(tmp) / "home-small"))[0] for _ in range(5)
        )

    ms = lambda s: f"{s * 1000:9.1f} ms"  # noqa: E731
    cpu_full, cpu_one = statistics.median(CPU["full"]), statistics.median(CPU["one"])
    rows = [
        (f"full index (add_sources), median of {args.rounds}", f"{ms(full)}  ({report.summary()})"),
        (f"reference, bm25s.BM25.index, median of {args.rounds}", f"{ms(floor)}  ratio {full / floor:.2f}x (not a floor: no chunking, no files)"),
        ("our tokenizer over all chunks", f"{ms(tokenize_s)}  ({tokenize_s / full:.0%} of the full index)"),
        ("refresh, nothing changed, first", f"{ms(first_nothing)}  (checks every index file and the store)"),
        ("refresh, nothing changed", f"{ms(nothing)}  (goal < 1000 ms; {r_nothing.summary()})"),
        (f"refresh, one file changed, median of {len(ones)}", f"{ms(one)}  {one / full:.1%} of full (goal < 5%; {r_one.summary()})"),
        ("  each sample", ", ".join(f"{x * 1000:.1f}" for x in ones) + " ms"),
        ("  the same in CPU time (load-independent)", f"{ms(cpu_one)}  {cpu_one / cpu_full:.1%} of the full index's {ms(cpu_full).strip()}"),
        *(
            (f"refresh, {count} files changed", f"{ms(sec)}  {sec / full:.1%} of full, {sec / count * 1000:.1f} ms a file")
            for count, sec in many.items()
        ),
        (f"refresh(paths=[file]), one changed, median of {len(paths_one)}", f"{ms(path_one)}  {path_one / full:.2%} of full ({r_path.summary()})"),
        ("  the same in CPU time", f"{ms(statistics.median(CPU['path']))}  {statistics.median(CPU['path']) / cpu_full:.2%} of the full index's"),
        *(
            (f"refresh(paths=...), {count} files changed", f"{ms(sec)}  {sec / full:.2%} of full, {sec / count * 1000:.2f} ms a file, {sec / path_one:.1f}x one")
            for count, sec in many_paths.items()
            if count > 1
        ),
        ("refresh, one added + one removed", f"{ms(add_remove)}  {add_remove / full:.1%} of full ({r_ar.summary()})"),
        ("first search, fresh KnowledgeBase", f"{ms(first_search)}  (goal < 500 ms; {len(hits)} hits)"),
        ("search again (warm), median", ms(again)),
        ("list_kbs, this KB", f"{ms(list_big)}  vs one-file KB {ms(list_small)}"),
        ("peak RSS", f"{rss_before:,.0f} MB before indexing, {rss_after:,.0f} MB after"),
    ]  # fmt: skip
    print(
        f"kb refresh benchmark: {n_files} files, {report.chunks} chunks, in {where or tempfile.gettempdir()}"
    )
    for label, value in rows:
        print(f"  {label + ':':44} {value}")
    # Judged against the full index of the same corpus from this run (the anchor), not bm25s.
    ok = one / full < 0.05 and nothing < 1.0 and first_search < 0.5
    print(
        f"RESULT: refresh of one file {one / full:.1%} of a full index, given its path "
        f"{path_one / full:.2%} (anchor {full * 1000:.0f} ms): {'PASS' if ok else 'FAIL'}"
    )
    return 0


def growth(sizes: list[int], args: argparse.Namespace) -> int:
    """The one-file refresh at each corpus size, beside the smallest size's (the anchor)."""
    where = args.dir or _beside_home()
    rows = []
    for n_files in sizes:
        with tempfile.TemporaryDirectory(prefix=".deeptutor-kb-growth-", dir=where) as tmp:
            corpus = Path(tmp) / "corpus"
            generate_corpus(corpus, n_files)
            kb = KnowledgeBase(Path(tmp) / "home", "bench", root=Path(tmp))
            full = _timed(lambda k=kb, c=corpus: k.add_sources([c]))[0]
            files = sorted(corpus.glob("*.md"))
            _touch(files[0], "# Warm-up\n\nfirst refresh given a path, not timed\n")
            kb.refresh(paths=[files[0]])
            samples: dict[str, list[float]] = {"paths": [], "full": [], "paths CPU": []}
            for i in range(args.samples):
                for way in ("paths", "full"):
                    time.sleep(2.1)  # a learner's edit: the last write settled
                    kb.refresh()
                    changed = files[(len(files) // 2 + 7 * i + (way == "full")) % len(files)]
                    _touch(changed, f"# Changed\n\nnew words about gradient descent {way} {i}\n")
                    start_cpu = time.process_time()
                    if way == "paths":
                        seconds, report = _timed(lambda k=kb, c=changed: k.refresh(paths=[c]))
                        samples["paths CPU"].append(time.process_time() - start_cpu)
                    else:
                        seconds, report = _timed(kb.refresh)
                    assert report.updated == 1, report.summary()
                    samples[way].append(seconds)
            rows.append((n_files, full, *(statistics.median(samples[k]) for k in samples)))
            print(f"  ({n_files:,} files measured)", flush=True)
    print(
        f"kb refresh growth: {', '.join(f'{n:,}' for n in sizes)} files, median of {args.samples}"
    )
    anchor = rows[0]
    for n_files, full, paths, whole, cpu in rows:
        print(
            f"  {n_files:>7,} files: full index {full * 1000:9.1f} ms ({full / anchor[1]:5.1f}x);"
            f" one file, given its path {paths * 1000:6.2f} ms ({paths / anchor[2]:4.2f}x,"
            f" CPU {cpu * 1000:.2f} ms {cpu / anchor[4]:4.2f}x, {paths / full:.2%} of full);"
            f" full pass {whole * 1000:7.1f} ms ({whole / anchor[3]:4.1f}x)"
        )
    last = rows[-1]
    ok = last[2] / anchor[2] < 2 and last[4] / anchor[4] < 2
    print(
        f"RESULT: one-file refresh given its path at {last[0]:,} files is {last[2] / anchor[2]:.2f}x"
        f" (CPU {last[4] / anchor[4]:.2f}x) that at {anchor[0]:,} (anchor {anchor[2] * 1000:.2f} ms,"
        f" this run), for {last[0] / anchor[0]:.0f}x the files (goal < 2x): {'PASS' if ok else 'FAIL'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
