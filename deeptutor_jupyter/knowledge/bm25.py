"""BM25 over a large base segment and a small delta, scored at query time from term counts.

Every BM25 score depends on the whole corpus (document count, average length, each term's
document frequency), so a matrix of precomputed scores has to be rewritten whenever one file
changes. This index keeps term counts instead, as in Lucene:

* **base**: each row's term ids and counts (doc-major, ``base_doc_*``) and the same postings by
  term (``base_indptr``, ``base_rows``, ``base_tfs``), written only when the base is rebuilt;
* **delta**: the rows added since, doc-major (``delta_doc_*``), small; its postings by term
  are built when the index is opened;
* the rows' lengths and the terms' document frequencies over the live rows: the base's
  (``base_dl``, ``base_df``, with the base), and, with the delta, only what moved since:
  the delta rows' lengths, the dead rows by number (rows whose file changed or went: the
  delta is only appended to, so its rows never move and the pieces of the file table that
  name them need not be rewritten) and the terms whose df moved, with the change.

A refresh therefore writes what changed since the base was built, never anything the size
of the base. When dead and delta rows pass a tenth of the base, the base is
rebuilt in the files' order. The numbers are bm25s's default (Lucene idf, k1=1.5, b=0.75), and
a row's score does not depend on where it lives, so an index refreshed this way scores every
chunk exactly as a full rebuild does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

K1, B = 1.5, 0.75
# The index's arrays, in files of arrays written together (``knowledge/arrays.py``): the
# base's postings (what a search reads), its doc-major copy (what a refresh reads), and what
# every refresh rewrites. The vocabulary is a JSON list beside them.
GROUPS = {
    "base": ("base_indptr", "base_rows", "base_tfs", "base_dl", "base_df"),
    "basedoc": ("base_doc_ptr", "base_doc_terms", "base_doc_tfs"),
    # What a refresh writes is sparse: the delta's rows and their lengths, the dead rows by
    # number, and the terms whose df differs from the base's with the difference. None of it
    # grows with the base (a dense dead mask, lengths and df were ~5 bytes a chunk and 4 a
    # term, rewritten and hashed at every refresh).
    "delta": (
        "delta_doc_ptr",
        "delta_doc_terms",
        "delta_doc_tfs",
        "delta_dl",
        "dead_rows",
        "df_terms",
        "df_change",
    ),
}
VOCAB = "vocab"
PARTS = (*GROUPS, VOCAB)
REBUILD_SHARE = 0.1  # dead + delta rows above this share of the base: rebuild the base


_POSTINGS_BATCH = 1 << 16  # postings turned term-major at a time (a few hundred kB: in cache)


def postings(ptr: Any, terms: Any, tfs: Any, n_vocab: int) -> tuple[Any, Any, Any]:
    """Doc-major (ptr, terms, tfs) turned term-major: (indptr, rows, tfs) over ``n_vocab``.

    A batch of docs at a time: each batch is sorted by term in cache, and its run of each
    term is copied to the next free slots of that term. Rows grow from batch to batch, so
    each term's rows come out in order, as one stable sort of every posting gives them;
    that sort, and the gathers of rows and counts it needs, ran over the whole file's
    postings out of cache (a 16 MB file's took 9x as long as a 4 MB file's).
    """
    import numpy as np

    ptr = np.asarray(ptr)
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(term_counts(terms, n_vocab), out=indptr[1:])
    rows_out = np.empty(len(terms), dtype=np.int32)
    tfs_out = np.empty(len(terms), dtype=np.int32)
    free = indptr[:-1].copy()  # the next free slot of each term
    doc, n_docs = 0, len(ptr) - 1
    while doc < n_docs:
        lo = int(ptr[doc])
        end = int(np.searchsorted(ptr, lo + _POSTINGS_BATCH, side="right")) - 1
        end = min(max(end, doc + 1), n_docs)
        hi = int(ptr[end])
        if hi > lo:
            order = term_order(terms[lo:hi])
            by_term = terms[lo:hi][order]
            starts = np.flatnonzero(by_term[1:] != by_term[:-1]) + 1
            starts = np.concatenate((np.zeros(1, np.int64), starts))
            runs = np.diff(starts, append=hi - lo)
            term = by_term[starts]
            slots = np.repeat(free[term] - starts, runs) + np.arange(hi - lo)
            rows = np.repeat(np.arange(doc, end, dtype=np.int32), np.diff(ptr[doc : end + 1]))
            rows_out[slots] = rows[order]
            tfs_out[slots] = tfs[lo:hi][order]
            free[term] += runs
        doc = end
    return indptr, rows_out, tfs_out


def term_counts(terms: Any, n_vocab: int) -> Any:
    """How many postings each term has (int64, ``n_vocab`` long), counted a piece at a time.

    ``np.bincount`` first copies its input to int64: over a whole file's term ids that is 8
    bytes a posting of fresh memory (13 MB for a 16 MB file, its page faults included), and
    the count took 7x as long for 4x the file. A piece is at least as long as the vocabulary,
    so counting it (its copy, and adding up to its largest id) stays linear in the postings.
    """
    import numpy as np

    counts = np.zeros(n_vocab, dtype=np.int64)
    step = max(_POSTINGS_BATCH, n_vocab)
    for start in range(0, len(terms), step):
        piece = np.bincount(terms[start : start + step])
        counts[: len(piece)] += piece
    return counts


def term_order(terms: Any) -> Any:
    """The permutation that sorts ``terms`` (ids below 2**32), in time linear in their number.

    A comparison sort of every posting was the one step of indexing a big file that grew
    faster than the file (n log n, and out of cache: 16 MB took ~9x as long as 4 MB). numpy
    sorts 16-bit keys stably by radix, so the ids are sorted by their low 16 bits, then, only
    when a vocabulary is that large, stably by their high 16 bits (a least-significant-digit
    radix sort).
    """
    import numpy as np

    order = np.argsort(terms.astype(np.uint16), kind="stable")  # the low 16 bits
    if len(terms) and int(terms.max()) > 0xFFFF:
        high = (terms >> 16).astype(np.uint16)[order]
        order = order[np.argsort(high, kind="stable")]
    return order


def lengths(ptr: Any, tfs: Any) -> Any:
    """Each doc's length (its term counts summed), one sum per doc over its slice of ``tfs``.

    One read of ``tfs`` and nothing the size of it written: running sums over every posting
    (an int64 array 2x the size of ``tfs``, then two gathers from it) grew 17x for a file 4x
    as big. ``reduceat`` sums from each start to the next; an empty doc would get the value at
    its start instead of 0, so only docs with terms are summed. The sums are int32 like the
    counts (an int64 sum would first cast every count): a doc is one chunk, a few thousand
    terms at most.
    """
    import numpy as np

    ptr = np.asarray(ptr)
    starts = ptr[:-1]
    full = ptr[1:] > starts
    out = np.zeros(len(starts), dtype=np.int32)
    if full.any():
        counts = np.asarray(tfs[: int(ptr[-1])]).astype(np.int32, copy=False)
        out[full] = np.add.reduceat(counts, starts[full], dtype=np.int32)
    return out


def statistics(
    base_dl: Any,
    base_df: Any,
    delta_dl: Any,
    dead_rows: Any,
    df_change: tuple[Any, Any],
    n_vocab: int,
) -> tuple[Any, Any, Any]:
    """(dl, dead, df) over every row and term, from the base's and a refresh's sparse changes
    (built in memory when an index is opened, never written whole)."""
    import numpy as np

    dl = np.concatenate([np.asarray(base_dl), np.asarray(delta_dl)]).astype(np.int32)
    dead = np.zeros(len(dl), dtype=bool)
    rows = np.asarray(dead_rows, dtype=np.int64)
    terms, change = np.asarray(df_change[0], dtype=np.int64), np.asarray(df_change[1])
    if len(base_df) > n_vocab or (len(rows) and (rows.min() < 0 or rows.max() >= len(dl))):
        raise ValueError("the index arrays do not agree with each other")
    if len(terms) != len(change) or (len(terms) and (terms.min() < 0 or terms.max() >= n_vocab)):
        raise ValueError("the index arrays do not agree with each other")
    dead[rows] = True
    dl[dead] = 0
    df = np.zeros(n_vocab, dtype=np.int64)
    df[: len(base_df)] = base_df
    df[terms] += change
    return dl, dead, df.astype(np.int32)


@dataclass
class Index:
    """An opened index: memory-mapped base postings, the delta's postings, the statistics."""

    base: tuple[Any, Any, Any]
    delta: tuple[Any, Any, Any]
    delta_first: int  # row id of the first delta row (= number of base rows)
    dl: Any
    dead: Any
    df: Any
    vocab: dict[str, int]
    live: int = 0  # rows not dead
    avg: float = 1.0  # average length of the live rows
    any_dead: bool = False

    def __post_init__(self) -> None:
        import numpy as np

        # Once per opening, not per query: both cost a pass over every row.
        self.any_dead = bool(self.dead.any())
        self.live = len(self.dl) - int(self.dead.sum())
        # Dead rows have length 0 in dl, so the sum is over the live rows only.
        self.avg = float(np.sum(self.dl, dtype=np.int64)) / max(self.live, 1) or 1.0

    @property
    def rows(self) -> int:
        return len(self.dl)

    @classmethod
    def open(cls, folder: Path, files: dict[str, str]) -> Index:
        """The index in ``folder``; ``files`` maps each part (``PARTS``) to its file."""
        import numpy as np
        import orjson

        from deeptutor_jupyter.knowledge.arrays import open_arrays

        arrays = open_arrays(folder / files["base"])
        base = tuple(arrays[name] for name in ("base_indptr", "base_rows", "base_tfs"))
        base_dl, base_df = arrays["base_dl"], arrays["base_df"]
        arrays = open_arrays(folder / files["delta"])
        delta_doc = [np.asarray(arrays[f"delta_doc_{n}"]) for n in ("ptr", "terms", "tfs")]
        terms = orjson.loads((folder / files[VOCAB]).read_bytes())
        vocab = {term: i for i, term in enumerate(terms)}
        dl, dead, df = statistics(
            base_dl, base_df, arrays["delta_dl"], arrays["dead_rows"],
            (arrays["df_terms"], arrays["df_change"]), len(vocab),
        )  # fmt: skip
        delta = postings(delta_doc[0], delta_doc[1], delta_doc[2], len(vocab))
        if len(arrays["delta_dl"]) != len(delta_doc[0]) - 1:
            raise ValueError("the index arrays do not agree with each other")
        return cls(base, delta, len(base_dl), dl, dead, df, vocab)

    def scores(self, ids: list[int]) -> Any:
        """The BM25 score of every row for a query of term ids (repeats count again)."""
        import numpy as np

        live, avg = self.live, self.avg
        dl = np.asarray(self.dl)
        out = np.zeros(self.rows, dtype=np.float64)
        for term in ids:
            df = int(self.df[term])
            if df == 0:
                continue
            idf = math.log(1 + (live - df + 0.5) / (df + 0.5))
            for indptr, rows, tfs, shift in (
                (*self.base, 0),
                (*self.delta, self.delta_first),
            ):
                if term + 1 >= len(indptr):
                    continue
                lo, hi = int(indptr[term]), int(indptr[term + 1])
                if lo == hi:
                    continue
                where = np.asarray(rows[lo:hi])
                if shift:
                    where = where + shift
                tf = np.asarray(tfs[lo:hi], dtype=np.float64)
                norm = K1 * (1 - B + B * dl[where] / avg)
                out[where] += idf * tf / (tf + norm)
        if self.any_dead:
            out[self.dead] = 0.0
        return out
