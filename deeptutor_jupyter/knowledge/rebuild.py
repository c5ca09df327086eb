"""Assembling a refreshed index from reused and new rows (format in ``knowledge/bm25.py``).

``Build`` collects the files' entries in the files' order, the rows of the files tokenised
anew, and the entries whose rows are gone; ``index_arrays`` turns that into the arrays to
write: only the delta and the statistics while the base can be kept, a new base otherwise.
Keeping the base costs what changed (the dropped files' rows, the delta), never a pass over
every file; only a new base walks them all, as it rewrites them all.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from deeptutor_jupyter.knowledge import bm25, storage
from deeptutor_jupyter.knowledge.filetable import COLUMNS, FileTable
from deeptutor_jupyter.knowledge.tokenize import Vocabulary

__all__ = ["Build", "index_arrays"]

BASE_DOC = ("base_doc_ptr", "base_doc_terms", "base_doc_tfs")
DELTA_DOC = ("delta_doc_ptr", "delta_doc_terms", "delta_doc_tfs")


@dataclass
class Build:
    """The new index as it is assembled, file by file, in the files' order.

    The loop over the files fills ``order`` (each file's row in the previous table, -1 for a
    file new to it) and ``fresh`` (the entries read now); ``settle`` turns them into
    ``table`` and ``dropped``.
    """

    order: list[int] = field(default_factory=list)
    fresh: dict[int, dict[str, Any]] = field(default_factory=dict)  # new row -> entry
    # new row -> (first doc among the new ones, docs) of each file tokenised by this build
    new: dict[int, tuple[int, int]] = field(default_factory=dict)
    replaced: list[int] = field(default_factory=list)  # previous rows of files re-read
    table: FileTable = field(default_factory=FileTable)
    # (first index row, rows) in the previous index of each file replaced, removed or unreadable
    dropped: list[tuple[int, int]] = field(default_factory=list)
    in_order: bool = True  # every file kept its row in the table, and none came or went
    # The new docs' token ids not counted yet, and each such doc's number of them: ``tokenised``
    # counts them once a batch is full, so no array of every token of a big file is grown
    # (growing one ~1 MiB at a time copied it again and again: 0.4 ms for a 4 MB file, 5.3 ms
    # for 16 MB), and a batch is counted while it is still in cache.
    ids: array[int] = field(default_factory=lambda: array("i"))
    doc_lengths: array[int] = field(default_factory=lambda: array("q"))
    new_docs: int = 0  # new docs tokenised so far, counted or not
    counted: list[tuple[Any, Any, Any]] = field(default_factory=list)  # see ``count_docs``
    stamps_moved: bool = False
    dropped_bytes: int = 0

    def settle(self, old: FileTable) -> None:
        """Assemble ``table`` from the previous one and what was read now; list the previous
        rows that are no longer live."""
        order = self.order
        # Every file kept its row, and none came or went: one comparison at C speed.
        self.in_order = order == list(range(len(old)))
        if self.in_order:
            table = old.copy()
            gone: list[int] = []
        else:
            table = (
                old.take([p if p >= 0 else 0 for p in order])
                if len(old)
                else FileTable({n: [None] * len(order) for n in COLUMNS})
            )
            kept = bytearray(len(old))
            for p in order:
                if p >= 0:
                    kept[p] = 1
            gone = [p for p in range(len(old)) if not kept[p]] if len(old) > sum(kept) else []
        for i, entry in self.fresh.items():
            table.set(i, entry)
            table.path[i] = entry["path"]
        self.table = table
        self.dropped = [(int(old.row[p]), int(old.chunks[p])) for p in (*gone, *self.replaced)]
        # Bytes of the chunk store no longer named by any file: when to compact it.
        self.dropped_bytes = sum(int(old.length[p]) for p in (*gone, *self.replaced))

    def tokenised(self, lengths: list[int], vocab: Vocabulary) -> None:
        """Docs whose ids were just appended to ``ids``, ``lengths`` ids each: counted as soon
        as ``_BATCH_TOKENS`` ids wait."""
        self.doc_lengths.extend(lengths)
        self.new_docs += len(lengths)
        if len(self.ids) >= _BATCH_TOKENS:
            self.count_waiting(vocab)

    def count_waiting(self, vocab: Vocabulary) -> None:
        """Count the ids still waiting (the last ones, before the index is assembled)."""
        if self.doc_lengths:
            self.counted += count_docs(self.ids, self.doc_lengths, vocab)
        self.ids, self.doc_lengths = array("i"), array("q")

    def chunks(self, before: int) -> int:
        """Live chunks once built, from ``before`` (the previous index's count)."""
        gone = sum(rows for _, rows in self.dropped)
        return before - gone + sum(n for _, n in self.new.values())


_INT32_KEYS = 2**31  # (doc, term) keys below this are sorted as int32
_BATCH_TOKENS = 1 << 18  # new docs are counted this many tokens at a time: each batch is
# sorted, and a sort of a bounded size (in cache) keeps counting linear in the tokens


def count_docs(ids: array[int], doc_lengths: array[int], vocab: Vocabulary) -> list[Any]:
    """The docs whose token ids are ``ids`` (``doc_lengths`` ids each, stopwords included)
    counted: (postings per doc, terms, tfs) for each batch of whole docs of about
    ``_BATCH_TOKENS`` ids, each doc's terms in order."""
    import numpy as np

    n_docs = len(doc_lengths)
    ids_np = np.frombuffer(ids, dtype=np.int32) if len(ids) else np.zeros(0, np.int32)
    per_doc = np.frombuffer(doc_lengths, np.int64) if n_docs else np.zeros(0, np.int64)
    offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(per_doc, out=offsets[1:])
    out: list[Any] = []
    first = 0
    while first < n_docs:
        last = int(np.searchsorted(offsets, offsets[first] + _BATCH_TOKENS, side="right")) - 1
        last = min(max(last, first + 1), n_docs)
        chunk = ids_np[offsets[first] : offsets[last]]
        # (doc << bits) | term, sorted: int32 keys when they fit (sorting them is about twice
        # as fast), int64 otherwise.
        bits = max(len(vocab) - 1, 1).bit_length()
        kind = np.int32 if (last - first) << bits < _INT32_KEYS else np.int64
        docs: Any = np.repeat(np.arange(last - first, dtype=kind), per_doc[first:last])
        keep = chunk >= vocab.n_stop
        keys = (docs[keep] << bits) | chunk[keep].astype(kind)
        del docs, keep
        unique, counts = np.unique(keys, return_counts=True)
        del keys
        out.append(
            (
                np.bincount(unique >> bits, minlength=last - first),
                (unique & ((1 << bits) - 1)).astype(np.int32),
                counts.astype(np.int32),
            )
        )
        first = last
    return out


def _new_docs(build: Build, vocab: Vocabulary) -> tuple[Any, Any, Any]:
    """(ptr, terms, tfs) of every new doc: the batches counted as they came, and the rest."""
    import numpy as np

    build.count_waiting(vocab)
    parts = [(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))]
    parts += build.counted
    build.counted = []
    ptr = np.zeros(build.new_docs + 1, dtype=np.int64)
    np.cumsum(np.concatenate([p[0] for p in parts]), out=ptr[1:])
    terms = np.concatenate([p[1] for p in parts])
    tfs = np.concatenate([p[2] for p in parts])
    return ptr, terms, tfs


def _gather(
    parts: list[tuple[tuple[Any, Any, Any], int, int]],
) -> tuple[Any, Any, Any]:
    """Doc-major arrays made of row slices ``(arrays, first, rows)`` of other doc-major arrays."""
    import numpy as np

    if len(parts) == 1 and parts[0][1] == 0 and parts[0][2] == len(parts[0][0][0]) - 1:
        (ptr, t, f), _, _ = parts[0]  # every row of one array (a new index of new files)
        if int(ptr[0]) == 0 and t.dtype == f.dtype == np.int32:
            return np.asarray(ptr, dtype=np.int64), t, f  # used as they are, not copied
    per_doc, terms, tfs = [np.zeros(0, np.int64)], [np.zeros(0, np.int32)], [np.zeros(0, np.int32)]
    for (ptr, t, f), first, rows in parts:
        lo, hi = int(ptr[first]), int(ptr[first + rows])
        per_doc.append(np.diff(ptr[first : first + rows + 1]))
        terms.append(t[lo:hi])
        tfs.append(f[lo:hi])
    counts = np.concatenate(per_doc)
    ptr_all = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr_all[1:])
    # concatenate casts as it copies: no second copy of every posting for the cast
    return ptr_all, np.concatenate(terms, dtype=np.int32), np.concatenate(tfs, dtype=np.int32)


def index_arrays(
    build: Build,
    loaded: storage.Loaded | None,
    vocab: Vocabulary,
    others: Callable[[], list[FileTable]],
) -> tuple[dict[str, Any], dict[str, str], int, list[FileTable] | None]:
    """(arrays to write, base files to carry over with their checksums, row count, and the
    tables of every other file when the base was rebuilt, else None).

    Sets the ``row`` of each file tokenised now in ``build.table``. The base is kept when what
    changed since it was built (its dead rows plus the delta) stays under ``REBUILD_SHARE`` of
    it: the new docs are appended to the delta, whose rows never move, so no other file's row
    changes. Otherwise every live row goes into a new base, and ``others()`` (the files of the
    pieces of the table not read by this refresh) get new rows too.
    """
    import numpy as np

    new = _new_docs(build, vocab)
    has_index = loaded is not None and int(loaded.manifest["chunks"]) > 0
    first_delta = rows_before = 0
    empty = (np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))
    base_doc: tuple[Any, ...] = empty
    delta_doc: tuple[Any, ...] = empty
    dead = delta_dl = np.zeros(0, dtype=np.int64)  # dead: the dead rows' numbers, sorted
    if loaded is not None and has_index:
        # Only the arrays a refresh reads, memory-mapped, each opened once: the term-major
        # postings a search uses are never opened here.
        *doc, delta_dl, dead_before = storage.load_arrays(
            loaded.folder,
            loaded.manifest,
            (*BASE_DOC, *DELTA_DOC, "delta_dl", "dead_rows"),
        )
        base_doc, delta_doc = tuple(doc[:3]), tuple(doc[3:])
        first_delta = len(base_doc[0]) - 1
        rows_before = first_delta + len(delta_doc[0]) - 1
        if len(delta_dl) != rows_before - first_delta or rows_before != loaded.manifest.get("rows"):
            raise storage.CorruptIndex("the index and the manifest hold different numbers of rows")
        dropped = [np.arange(row, row + rows) for row, rows in build.dropped if rows]
        dead = np.union1d(np.asarray(dead_before, dtype=np.int64), np.concatenate([dead, *dropped]))

    def source(kind: str, first: int) -> tuple[tuple[Any, ...], int]:
        if kind == "new":
            return new, first
        if first < first_delta:
            return base_doc, first
        return delta_doc, first - first_delta

    n_vocab = len(vocab)
    n_new = len(new[0]) - 1
    delta_rows = rows_before - first_delta + n_new
    dead_in_base = int(np.searchsorted(dead, first_delta))
    if has_index and dead_in_base + delta_rows <= bm25.REBUILD_SHARE * first_delta:
        assert loaded is not None
        kept = _keep_base(build, loaded, new, (base_doc, delta_doc), (dead, delta_dl), n_vocab)
        return (*kept, None)
    rest = others() if has_index else []
    segments: list[tuple[str, int, int]] = []
    row = 0
    for table in (build.table, *rest):
        new_rows, made = table.row, build.new if table is build.table else {}
        for i, chunks in enumerate(table.chunks):
            fresh = made.get(i)
            if fresh is not None:
                if fresh[1]:
                    segments.append(("new", fresh[0], fresh[1]))
            elif chunks:
                segments.append(("old", int(new_rows[i]), int(chunks)))
            else:
                continue
            new_rows[i] = row
            row += int(chunks)
    # Slices never run across the base's end into the delta: they come from other arrays.
    merged = _coalesce(segments, first_delta)
    ptr, terms, tfs = _gather([(*source(k, f), n) for k, f, n in merged])
    indptr, rows_by_term, tfs_by_term = bm25.postings(ptr, terms, tfs, n_vocab)
    arrays = {
        "base_indptr": indptr,
        "base_rows": rows_by_term,
        "base_tfs": tfs_by_term,
        "base_dl": bm25.lengths(ptr, tfs),
        "base_df": np.diff(indptr).astype(np.int32),  # a term's postings: its docs
        "base_doc_ptr": ptr,
        "base_doc_terms": terms,
        "base_doc_tfs": tfs,
        **dict(zip(DELTA_DOC, empty, strict=True)),
        "delta_dl": np.zeros(0, np.int32),
        "dead_rows": np.zeros(0, np.int64),
        "df_terms": np.zeros(0, np.int32),
        "df_change": np.zeros(0, np.int32),
    }
    return arrays, {}, row, list(rest)


def _keep_base(
    build: Build,
    loaded: storage.Loaded,
    new: tuple[Any, Any, Any],
    docs: tuple[tuple[Any, ...], tuple[Any, ...]],
    stats: tuple[Any, Any],
    n_vocab: int,
) -> tuple[dict[str, Any], dict[str, str], int]:
    """The delta with the new docs appended, the dead rows, and the terms whose df moved
    since the base was built: all sized by what changed since then, none by the base."""
    import numpy as np

    (base_ptr, base_terms, _), delta_doc = docs
    dead, delta_dl = stats
    first_delta = len(base_ptr) - 1
    row = first_delta + len(delta_doc[0]) - 1
    for i, (_, n) in build.new.items():
        build.table.row[i] = row
        row += n
    if row - len(dead) != build.chunks(int(loaded.manifest["chunks"])):
        raise storage.CorruptIndex("the index's dead rows disagree with the manifest")
    d_ptr, d_terms, d_tfs = _gather(
        [(delta_doc, 0, len(delta_doc[0]) - 1), (new, 0, len(new[0]) - 1)]
    )
    # df moves by the live delta's terms, less the terms of the base's dead rows.
    dead_delta = np.zeros(len(d_ptr) - 1, dtype=bool)
    dead_delta[dead[dead >= first_delta] - first_delta] = True
    live_delta = np.repeat(~dead_delta, np.diff(d_ptr))
    change = np.bincount(d_terms[live_delta], minlength=n_vocab)
    runs = _runs_of(dead[dead < first_delta])
    if runs:
        gone = [np.asarray(base_terms[int(base_ptr[a]) : int(base_ptr[b])]) for a, b in runs]
        change -= np.bincount(np.concatenate(gone), minlength=n_vocab)
    moved = np.flatnonzero(change).astype(np.int32)
    arrays = {
        "delta_doc_ptr": d_ptr,
        "delta_doc_terms": d_terms,
        "delta_doc_tfs": d_tfs,
        "delta_dl": np.concatenate([np.asarray(delta_dl), bm25.lengths(new[0], new[2])]),
        "dead_rows": dead,
        "df_terms": moved,
        "df_change": change[moved].astype(np.int32),
    }
    files = storage.index_names(loaded.manifest)
    keep = {files[g]: loaded.manifest["index_files"][files[g]] for g in ("base", "basedoc")}
    return arrays, keep, row


def _runs_of(rows: Any) -> list[tuple[int, int]]:
    """(start, end) of each run of consecutive numbers in sorted ``rows``."""
    import numpy as np

    if not len(rows):
        return []
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [len(rows)]))
    return [(int(rows[a]), int(rows[b - 1]) + 1) for a, b in zip(starts, ends, strict=True)]


def _coalesce(segments: list[tuple[str, int, int]], boundary: int) -> list[tuple[str, int, int]]:
    """Adjacent segments of the same kind whose rows follow each other become one slice, as
    long as both lie on the same side of ``boundary`` (the first delta row)."""
    out: list[tuple[str, int, int]] = []
    for kind, first, rows in segments:
        if out:
            last_kind, last_first, last_rows = out[-1]
            same_side = kind == "new" or (last_first < boundary) == (first < boundary)
            if last_kind == kind and last_first + last_rows == first and same_side:
                out[-1] = (kind, last_first, last_rows + rows)
                continue
        out.append((kind, first, rows))
    return out
