"""A big file is indexed in bounded pieces, to the same index as in one piece (issue 28).

Ingest of 4 MB -> 16 MB grew 4.6-5.2x: whole-file lists of lines, sections and chunks, one
19 MB write of the chunk store, a sort and gathers of every posting, running sums over every
posting and single writes of 3-13 MB arrays, all out of cache. Each is now done a bounded
piece at a time; these tests count the pieces (never a clock) and check that the pieces
give the very same index, store and search results as one piece.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deeptutor_jupyter.knowledge import KnowledgeBase, arrays, bm25, ingest, rebuild
from deeptutor_jupyter.knowledge import base as kb_base
from deeptutor_jupyter.knowledge.arrays import open_arrays
from deeptutor_jupyter.knowledge.chunkstore import StoreWriter
from tests.knowledge.helpers import file_table, index_file

QUERIES = ["alpha beta", "section", "gamma", "omega delta kappa", "zeta"]


def _markdown(path: Path, paragraphs: int, seed: int = 3, *, ascii: bool = False) -> Path:
    """Headed Markdown with the line breaks a block-wise split could cut wrongly (CRLF, form
    feed, U+2028 unless ``ascii``), fenced code holding '#' lines, and a vocabulary that grows
    with it."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "kappa", "omega", "zeta", "theta", "rho"]
    words += [f"w{i}" for i in range(300)]
    parts: list[str] = []
    for n in range(paragraphs):
        if n % 5 == 0:
            parts.append(f"{'#' * (1 + n % 3)} Section {n // 5}\n\n")
        if n % 17 == 0:
            parts.append("```python\n# not a heading\nx = 1\n```\n\n")
        ends = ["\n", "\r\n", "\x0c\n", "\n" if ascii else "\u2028"]
        lines = [" ".join(rng.choices(words, k=12)) + rng.choice(ends) for _ in range(4)]
        parts.append("".join(lines) + "\n")
    path.write_text("".join(parts), encoding="utf-8", newline="")
    return path


def _small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every bounded step cut small, so a file of a few hundred kB takes many pieces."""
    monkeypatch.setattr(kb_base, "_PROGRESS_STEP", 1 << 12)
    monkeypatch.setattr(ingest, "_LINES_BLOCK", 64)
    monkeypatch.setattr(bm25, "_POSTINGS_BATCH", 97)
    monkeypatch.setattr(rebuild, "_BATCH_TOKENS", 300)
    monkeypatch.setattr(arrays, "_SLICE", 4096)
    monkeypatch.setattr(arrays, "_JOIN_BELOW", 4096)


def _index(folder: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in ("base", "basedoc", "delta"):
        out.update(open_arrays(index_file(folder, part)))
    out["vocab"] = index_file(folder, "vocab").read_bytes()
    return out


def _results(kb: KnowledgeBase) -> list[list[tuple[str, float]]]:
    return [[(h.chunk.chunk_id, h.score) for h in kb.search(q, k=50)] for q in QUERIES]


@pytest.mark.parametrize("suffix", [".md", ".txt"])
def test_a_file_in_pieces_gives_the_same_index_and_search_as_in_one_piece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    source = _markdown(tmp_path / f"notes{suffix}", paragraphs=300)
    whole = KnowledgeBase(tmp_path / "whole", "k", root=tmp_path)
    whole.add_sources([source])
    _small_pieces(monkeypatch)
    pieces = KnowledgeBase(tmp_path / "pieces", "k", root=tmp_path)
    pieces.add_sources([source])
    one, many = _index(whole.folder), _index(pieces.folder)
    assert list(one) == list(many)
    for name, array in one.items():
        assert np.array_equal(np.asarray(array), np.asarray(many[name])), name
    # the same chunks (titles, text, line numbers), byte for byte under the same checksum
    assert file_table(whole.folder)["digest"] == file_table(pieces.folder)["digest"]
    stores = [next(kb.folder.glob("chunks-*.jsonl")).read_bytes() for kb in (whole, pieces)]
    assert stores[0] == stores[1]
    assert pieces.verify() is None
    results = _results(whole)
    assert all(results) and results == _results(pieces)


def test_postings_in_batches_are_one_stable_sort_by_term() -> None:
    rng = np.random.default_rng(9)
    for top, batch in ((50, 1), (50, 7), (200_000, 13), (300, 1 << 16)):
        sizes = rng.integers(0, 6, 40)
        sizes[[0, 5, 39]] = 0  # empty docs, the last one too
        ptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        terms = rng.integers(0, top, int(ptr[-1])).astype(np.int32)
        tfs = rng.integers(1, 9, len(terms)).astype(np.int32)
        rows = np.repeat(np.arange(40, dtype=np.int32), sizes)
        order = np.argsort(terms, kind="stable")
        real = bm25._POSTINGS_BATCH
        bm25._POSTINGS_BATCH = batch
        try:
            indptr, by_term_rows, by_term_tfs = bm25.postings(ptr, terms, tfs, top)
        finally:
            bm25._POSTINGS_BATCH = real
        assert np.array_equal(by_term_rows, rows[order]), (top, batch)
        assert np.array_equal(by_term_tfs, tfs[order])
        assert np.array_equal(np.diff(indptr), np.bincount(terms, minlength=top))


def test_terms_are_counted_a_piece_at_a_time_to_the_counts_of_all_of_them() -> None:
    rng = np.random.default_rng(4)
    for n, top, batch in ((1_000, 30, 7), (5_000, 70_000, 64), (0, 10, 8), (3, 10, 1)):
        terms = rng.integers(0, top, n).astype(np.int32)
        terms[-1:] = top - 1  # the last piece holds the largest id
        real = bm25._POSTINGS_BATCH
        bm25._POSTINGS_BATCH = batch
        try:
            got = bm25.term_counts(terms, top)
        finally:
            bm25._POSTINGS_BATCH = real
        assert got.dtype == np.int64 and np.array_equal(got, np.bincount(terms, minlength=top))


def test_the_base_df_is_each_terms_docs(tmp_path: Path) -> None:
    source = _markdown(tmp_path / "notes.md", paragraphs=120)
    kb = KnowledgeBase(tmp_path / "kb", "k", root=tmp_path)
    kb.add_sources([source])
    index = _index(kb.folder)
    terms, ptr = np.asarray(index["base_doc_terms"]), np.asarray(index["base_doc_ptr"])
    rows = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
    docs = np.unique(np.stack((terms, rows)), axis=1)[0]  # each (term, doc) once
    df = np.bincount(docs, minlength=len(index["base_df"]))
    assert index["base_df"].dtype == np.int32 and np.array_equal(index["base_df"], df)


def test_a_big_file_is_read_stored_and_written_a_bounded_piece_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _markdown(tmp_path / "big.md", paragraphs=600)
    _small_pieces(monkeypatch)
    made: list[int] = []  # chunks made by the reader so far, at each store write
    store_writes: list[int] = []
    index_writes: list[int] = []
    chunks_made = 0
    real_chunk, real_write, real_write_all = ingest.Chunk, StoreWriter.write, arrays.write_all

    def counting_chunk(*args: Any, **kwargs: Any) -> Any:
        nonlocal chunks_made
        chunks_made += 1
        return real_chunk(*args, **kwargs)

    def spy_write(self: StoreWriter, data: bytes) -> None:
        made.append(chunks_made)
        store_writes.append(len(data))
        real_write(self, data)

    def spy_write_all(fd: int, data: Any) -> None:
        index_writes.append(len(data))
        real_write_all(fd, data)

    monkeypatch.setattr(ingest, "Chunk", counting_chunk)
    monkeypatch.setattr(StoreWriter, "write", spy_write)
    monkeypatch.setattr(arrays, "write_all", spy_write_all)
    kb = KnowledgeBase(tmp_path / "home", "k", root=tmp_path)
    report = kb.add_sources([source])
    assert report.chunks == chunks_made > 20
    # Streaming: the store's first write comes before the reader has cut a tenth of the
    # file (a reader that makes the whole list first has made every chunk by then).
    assert made[0] < chunks_made / 10
    # Each store write is a bounded batch (a step of text and its chunk lines' envelopes),
    # not the file's 170+ kB of lines at once; each index write at most one slice.
    assert len(store_writes) > 10 and max(store_writes) <= 4 * (1 << 12), store_writes
    assert sum(index_writes) > 8 * 4096 and max(index_writes) <= 4096, index_writes
    assert kb.verify() is None


def test_lengths_and_postings_hold_nothing_the_size_of_the_postings_beside_their_output() -> None:
    import tracemalloc

    rng = np.random.default_rng(2)
    n_docs, n = 2_000, 1_000_000
    ptr = np.linspace(0, n, n_docs + 1).astype(np.int64)
    terms = rng.integers(0, 5_000, n).astype(np.int32)
    tfs = rng.integers(1, 4, n).astype(np.int32)
    tracemalloc.start()
    try:
        bm25.lengths(ptr, tfs)
        lengths_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        by_term = bm25.postings(ptr, terms, tfs, 5_000)
        postings_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # lengths: an int32 per doc (running sums over every posting were 8 bytes a posting)
    assert lengths_peak < n, lengths_peak
    # postings: its output (rows and counts, 8 bytes a posting) and the temporaries of one
    # batch of 65,536 postings (~3 MB); one sort of every posting also held its order (8 bytes
    # a posting), the row ids and the sort keys: 22 MB here
    output = sum(a.nbytes for a in by_term)
    assert postings_peak < output + 4 * 2**20, (postings_peak, output)


def test_a_new_index_of_new_files_uses_their_counted_arrays_without_a_copy() -> None:
    ptr = np.array([0, 2, 5], dtype=np.int64)
    terms, tfs = np.arange(5, dtype=np.int32), np.ones(5, dtype=np.int32)
    got = rebuild._gather([((ptr, terms, tfs), 0, 2)])
    assert all(np.shares_memory(a, b) for a, b in zip(got, (ptr, terms, tfs), strict=True))
    part = rebuild._gather([((ptr, terms, tfs), 1, 1)])  # a slice is still cut out
    assert part[0].tolist() == [0, 3] and part[1].tolist() == [2, 3, 4]


@pytest.mark.parametrize("suffix", [".md", ".txt"])
def test_reading_a_big_file_lazily_holds_its_text_and_little_more(
    tmp_path: Path, suffix: str
) -> None:
    import tracemalloc

    source = _markdown(tmp_path / f"big{suffix}", paragraphs=3000, ascii=True)  # ~700 kB
    data = source.read_bytes()
    tracemalloc.start()
    try:
        n = sum(1 for _ in ingest.ingest_file(source, tmp_path, "k", data=data, lazy=True))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n > 400
    # The decoded text (1x for ASCII) and one block of lines, one section, one chunk at a
    # time. A list of every line was another ~2x the file, lists of every chunk ~1.2-1.5x.
    assert peak < 1.6 * len(data), peak / len(data)
    if suffix == ".md":  # ASCII Markdown is decoded a block at a time: no copy of the text
        assert peak < 0.5 * len(data), peak / len(data)


def test_ascii_markdown_read_a_block_at_a_time_gives_the_pieces_of_its_decoded_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _markdown(tmp_path / "notes.md", paragraphs=200, ascii=True).read_bytes()
    # ASCII line breaks that str.splitlines knows and bytes.splitlines does not
    data += b"# End\n\none\x1ctwo\x1dthree\x1efour\x0bfive\rsix\r\nseven"
    monkeypatch.setattr(ingest, "_LINES_BLOCK", 64)
    from_bytes = list(ingest._markdown_pieces("notes.md", data))
    from_text = list(ingest._markdown_pieces("notes.md", data.decode("utf-8")))
    assert len(from_bytes) > 40 and from_bytes == from_text
    assert from_text[-1].line is not None and from_text[-1].line > 1000
