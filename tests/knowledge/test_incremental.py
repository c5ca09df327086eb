"""Incremental refresh: the same index as a full rebuild, for the work of what changed only.

Also the regressions of issue 9 for ingestion: links out of the folder, binary files renamed
to text, line counting that was quadratic in the file's size, progress inside a big file.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.knowledge import KnowledgeBase, ingest
from deeptutor_jupyter.knowledge import base as kb_base
from deeptutor_jupyter.knowledge.storage import iter_chunks
from tests.knowledge.helpers import file_entries, file_table, index_file

QUERIES = ["gradient descent", "matrix rank", "sorting lists", "eigenvalues", "loops while"]


def _touch(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    later = time.time_ns() + 5_000_000_000  # a new mtime even on a coarse clock
    os.utime(path, ns=(later, later))


def _corpus(folder: Path, n: int = 30) -> Path:
    folder.mkdir()
    topics = ["gradient descent", "matrix rank", "sorting lists", "eigenvalues", "while loops"]
    for i in range(n):
        topic = topics[i % len(topics)]
        body = "\n\n".join(
            f"## Part {j}\n\n{topic} note {i} {j} with words {i * j} {topic.split()[0]}"
            for j in range(1 + i % 3)
        )
        (folder / f"n{i:03d}.md").write_text(f"# Note {i}\n\n{body}\n", encoding="utf-8")
    return folder


def _indexed(tmp_path: Path, n: int = 30) -> tuple[Path, KnowledgeBase]:
    """A course of ``n`` notes and its knowledge base "inc", indexed."""
    course = _corpus(tmp_path / "course", n=n)
    kb = KnowledgeBase(tmp_path / "home", "inc", root=tmp_path)
    kb.add_sources([course])
    return course, kb


def _results(kb: KnowledgeBase) -> list[list[tuple[str, float]]]:
    everything = kb.info()["chunks"]
    return [
        sorted((h.chunk.chunk_id, round(h.score, 5)) for h in kb.search(q, k=everything))
        for q in QUERIES
    ]


def test_refresh_gives_the_same_results_as_a_full_rebuild(tmp_path: Path) -> None:
    course, kb = _indexed(tmp_path)
    _touch(course / "n004.md", "# Changed\n\nmatrix rank and gradient descent, rewritten\n")
    (course / "n010.md").unlink()
    _touch(course / "zz-added.md", "# Added\n\neigenvalues of a symmetric matrix\n")
    report = kb.refresh()
    assert (report.updated, report.removed, report.added) == (1, 1, 1)
    assert report.unchanged == 28

    full = KnowledgeBase(tmp_path / "home2", "full", root=tmp_path)
    full.add_sources([course])
    assert _results(kb) == _results(full)
    assert [c.chunk_id for c in iter_chunks(kb.folder)] == [
        c.chunk_id for c in iter_chunks(full.folder)
    ]
    assert kb.verify() is None


def test_a_small_change_rewrites_the_delta_not_the_base(tmp_path: Path) -> None:
    course, kb = _indexed(tmp_path, n=120)
    base = index_file(kb.folder, "base")
    inode = base.stat().st_ino
    for step in range(12):  # changed, added and removed files pile up in the delta
        _touch(course / f"n{step * 7:03d}.md", f"# Step {step}\n\neigenvalues step {step}\n")
        _touch(course / f"new{step:02d}.md", f"# New {step}\n\nmatrix rank {step}\n")
        (course / f"n{step * 7 + 3:03d}.md").unlink()
        if step % 3 == 1:  # a file of the delta changes again, and another leaves it
            _touch(course / f"new{step - 1:02d}.md", f"# Again {step}\n\nsorting lists\n")
        if step % 3 == 2:
            (course / f"new{step - 2:02d}.md").unlink()
        report = kb.refresh()
        # Every step is incremental: a disagreement would show as a rebuild from corruption.
        assert not report.rebuilt_from_corruption and report.errors == [], step
        full = KnowledgeBase(tmp_path / f"home-{step}", "full", root=tmp_path)
        full.add_sources([course])
        assert _results(kb) == _results(full), step
        manifest = json.loads((kb.folder / "manifest.json").read_bytes())
        if step == 0:
            assert base.stat().st_ino == inode  # the base was carried over, not rewritten
            assert index_file(kb.folder, "base") == base
            assert manifest["rows"] > manifest["chunks"]  # the changed file's old rows are dead
    assert index_file(kb.folder, "base") != base  # past a tenth of the base, rebuilt
    assert kb.verify() is None


def test_refresh_reads_and_tokenises_only_what_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    course, kb = _indexed(tmp_path)
    hashed: list[Path] = []
    ingested: list[Path] = []
    tokenised: list[str] = []
    real_read, real_ingest, real_ids = (
        kb_base.storage.read_source,
        kb_base.ingest_file,
        kb_base.append_token_ids,
    )

    def spy_read(path: str, **kw: Any) -> tuple[bytes, str]:
        hashed.append(Path(path))
        return real_read(path, **kw)

    monkeypatch.setattr(kb_base.storage, "read_source", spy_read)
    monkeypatch.setattr(
        kb_base,
        "ingest_file",
        lambda p, *a, **kw: ingested.append(p) or real_ingest(p, *a, **kw),
    )
    monkeypatch.setattr(
        kb_base, "append_token_ids", lambda i, t, v: tokenised.extend(t) or real_ids(i, t, v)
    )

    before = json.loads((kb.folder / "manifest.json").read_bytes())
    assert kb.refresh().unchanged == 30
    sources = [p for p in hashed if course in p.parents]
    assert sources == [] and ingested == [] and tokenised == []  # stat only
    after = json.loads((kb.folder / "manifest.json").read_bytes())
    assert after["shards"] == before["shards"] and after["index_files"] == before["index_files"]

    same = (course / "n001.md").read_text(encoding="utf-8")
    _touch(course / "n001.md", same)  # touched, identical: read and hashed, not chunked
    _touch(course / "n002.md", "# New\n\nsorting lists by key\n")
    report = kb.refresh()
    assert (report.updated, report.unchanged) == (1, 29)
    assert sorted(p.name for p in hashed if course in p.parents) == ["n001.md", "n002.md"]
    assert [Path(p).name for p in ingested] == ["n002.md"]
    assert len(tokenised) == 1 and "sorting lists by key" in tokenised[0]


def test_the_chunk_store_is_appended_to_and_compacted(tmp_path: Path) -> None:
    course, kb = _indexed(tmp_path, n=5)
    first = json.loads((kb.folder / "manifest.json").read_text(encoding="utf-8"))
    offsets = {rel: entry["offset"] for rel, entry in file_entries(kb.folder).items()}
    _touch(course / "n003.md", "# Three\n\n" + "eigenvalues " * 50)
    kb.refresh()
    second = json.loads((kb.folder / "manifest.json").read_text(encoding="utf-8"))
    assert second["store"] == first["store"]  # appended, not rewritten
    for rel in ("course/n000.md", "course/n001.md"):
        assert file_entries(kb.folder)[rel]["offset"] == offsets[rel]
    for n in range(60):  # the store would grow without bound without compaction
        _touch(course / "n003.md", f"# Three\n\n{'eigenvalues rewritten ' * 400} {n}")
        kb.refresh()
    last = json.loads((kb.folder / "manifest.json").read_text(encoding="utf-8"))
    live = sum(file_table(kb.folder)["length"])
    assert last["store_live"] == live
    assert (kb.folder / last["store"]).stat().st_size <= 2 * live + (1 << 16)
    assert len(list(kb.folder.glob("chunks-*.jsonl"))) <= 2
    assert kb.verify() is None
    assert kb.search("rewritten")[0].chunk.path == "course/n003.md"


def _age(kb: KnowledgeBase) -> None:
    """Move the index's files 10 s into the past, as if written before the last clock tick."""
    past = time.time_ns() - 10_000_000_000
    for path in [*kb.folder.glob("chunks-*.jsonl"), *(kb.folder / "index").iterdir()]:
        os.utime(path, ns=(past, past))


def test_settled_files_are_trusted_by_stamp_until_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _course, kb = _indexed(tmp_path, n=5)
    assert not json.loads((kb.folder / "manifest.json").read_bytes())["stamps"]
    _age(kb)
    kb.refresh()  # hashes everything, then records the stamps of what it checked
    stamps = json.loads((kb.folder / "manifest.json").read_bytes())["stamps"]
    assert len(stamps) == 5  # 4 index files and the chunk store
    hashed: list[str] = []
    real = kb_base.storage.checksum_file
    monkeypatch.setattr(
        kb_base.storage, "checksum_file", lambda p: hashed.append(p.name) or real(p)
    )
    monkeypatch.setattr(kb_base.storage, "check_ranges", _fail_if_ranges_checked)
    assert kb.refresh().unchanged == 5
    assert KnowledgeBase(tmp_path / "home", "inc").search("gradient")
    assert hashed == []
    monkeypatch.undo()
    # A write moves the stamp, whatever the size: the file is hashed again and the damage seen.
    base = index_file(kb.folder, "base")
    base.write_bytes(base.read_bytes()[:-4] + b"\x07\x00\x00\x00")
    assert kb.verify() is not None
    report = kb.refresh()
    assert report.rebuilt_from_corruption and kb.verify() is None


def _fail_if_ranges_checked(
    folder: Path, manifest: dict[str, object], _table: object, **kw: bool
) -> None:
    from deeptutor_jupyter.knowledge import storage

    assert kw.get("trust", True) and storage.trusted(folder, manifest, str(manifest["store"]))


def test_a_damaged_chunk_found_by_search_rebuilds_the_index(tmp_path: Path) -> None:
    _course, kb = _indexed(tmp_path, n=5)
    manifest = json.loads((kb.folder / "manifest.json").read_text(encoding="utf-8"))
    store = kb.folder / manifest["store"]
    data = bytearray(store.read_bytes())
    data[data.index(b"eigenvalues")] = ord("E")  # same size: only the checksum can tell
    store.write_bytes(bytes(data))
    fresh = KnowledgeBase(tmp_path / "home", "inc")
    hits = fresh.search("eigenvalues")
    assert hits and all("Eigenvalues" not in h.chunk.text for h in hits)
    assert fresh.last_report is not None and fresh.last_report.rebuilt_from_corruption
    assert fresh.verify() is None


def test_an_index_of_the_previous_format_is_rebuilt_from_its_sources(tmp_path: Path) -> None:
    course = _corpus(tmp_path / "course", n=3)
    kb = KnowledgeBase(tmp_path / "home", "old", root=tmp_path)
    kb.add_sources([course])
    manifest = json.loads((kb.folder / "manifest.json").read_text(encoding="utf-8"))
    manifest["version"] = 1
    (kb.folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    report = KnowledgeBase(tmp_path / "home", "old").refresh()
    assert report.added + report.updated == 3 and report.rebuilt_from_corruption
    assert kb.search("gradient descent")


def test_a_version_2_index_is_rebuilt_and_said_to_be_older_not_damaged(tmp_path: Path) -> None:
    course, kb = _indexed(tmp_path, n=3)
    # What version 2 wrote: a dict per file, one .npy file per array, a staging leftover.
    manifest = json.loads((kb.folder / "manifest.json").read_bytes())
    table = file_table(kb.folder)
    manifest["files"] = {
        path: {name: table[name][i] for name in table if name != "path"}
        for i, path in enumerate(table["path"])
    }
    manifest["version"] = 2
    manifest["index_files"] = {"dl.npy": "0" * 64, "vocab.json": "0" * 64}
    (kb.folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for name in manifest["index_files"]:
        (kb.folder / "index" / name).write_bytes(b"old")
    (kb.folder / ".index-new-0123").mkdir()
    report = KnowledgeBase(tmp_path / "home", "inc").refresh()
    assert report.rebuilt_from_older_version and report.added == 3
    assert "older version's format and has been rebuilt" in report.summary()
    assert "damaged" not in report.summary()
    assert kb.info()["sources"] == [str(course.resolve())]  # the learner's sources kept
    left = {p.name for p in (kb.folder / "index").iterdir()}
    assert not left & {"dl.npy", "vocab.json"} and not (kb.folder / ".index-new-0123").exists()
    assert kb.search("gradient descent") and kb.verify() is None


# --- issue 9: ingestion -------------------------------------------------------------------------


def test_links_to_files_outside_the_folder_are_skipped_and_named(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir()
    (private / "diary.md").write_text("# Secret\n\nmy bank password hint", encoding="utf-8")
    course = _corpus(tmp_path / "course", n=2)
    (course / "leak.md").symlink_to(private / "diary.md")
    (course / "alias.md").symlink_to(course / "n000.md")  # inside: fine, indexed once
    (course / "linked-dir").symlink_to(private, target_is_directory=True)
    kb = KnowledgeBase(tmp_path / "home", "k", root=tmp_path)
    report = kb.add_sources([course])
    assert report.added == 2
    assert kb.search("password") == []
    (problem,) = report.errors
    assert "leak.md" in problem and "outside the folder" in problem


def _swap_after_discovery(monkeypatch: pytest.MonkeyPatch, swap: Any) -> None:
    """Run ``swap`` between discovery and reading: the race of issue 23, item 7."""
    real = kb_base.discover

    def discover_then_swap(sources: list[str], errors: list[str]) -> Any:
        found = real(sources, errors)
        swap()
        return found

    monkeypatch.setattr(kb_base, "discover", discover_then_swap)


@pytest.mark.parametrize("how", ["file", "folder"])
def test_a_file_swapped_for_a_link_after_discovery_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    private = tmp_path / "private"
    private.mkdir()
    (private / "n001.md").write_text("# Secret\n\nmy bank password hint", encoding="utf-8")
    course = _corpus(tmp_path / "course", n=2)
    (course / "sub").mkdir()
    (course / "sub" / "n001.md").write_text("# Plain\n\nnothing here", encoding="utf-8")

    def swap() -> None:
        if how == "file":  # the file itself becomes a link
            (course / "n001.md").unlink()
            (course / "n001.md").symlink_to(private / "n001.md")
        else:  # a folder on the way becomes a link to a folder with a file of the same name
            (course / "sub" / "n001.md").unlink()
            (course / "sub").rmdir()
            (course / "sub").symlink_to(private, target_is_directory=True)

    _swap_after_discovery(monkeypatch, swap)
    kb = KnowledgeBase(tmp_path / "home", "k", root=tmp_path)
    report = kb.add_sources([course])
    assert kb.search("password") == []
    (problem,) = report.errors
    assert "n001.md" in problem and "after it was found" in problem


def test_a_file_swapped_for_a_fifo_after_discovery_does_not_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    course = _corpus(tmp_path / "course", n=2)
    fifo = course / "n001.md"

    def swap() -> None:
        fifo.unlink()
        os.mkfifo(fifo)

    _swap_after_discovery(monkeypatch, swap)
    kb = KnowledgeBase(tmp_path / "home", "k", root=tmp_path)
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(kb.add_sources([course])), daemon=True)
    worker.start()
    worker.join(30)
    if worker.is_alive():  # blocked opening the FIFO: let it go before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(5)
    assert done, "indexing hung on a FIFO"
    (problem,) = done[0].errors
    assert "n001.md" in problem and "not a regular file" in problem
    assert done[0].added == 1


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("image.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4, "NUL"),
        ("random.txt", bytes(range(1, 256)) * 16, "not text"),
    ],
)
def test_binary_files_with_a_text_suffix_are_skipped(
    tmp_path: Path, name: str, data: bytes, words: str
) -> None:
    course = _corpus(tmp_path / "course", n=1)
    (course / name).write_bytes(data)
    kb = KnowledgeBase(tmp_path / "home", "k", root=tmp_path)
    report = kb.add_sources([course])
    assert report.added == 1 and kb.info()["files"] == 1
    (problem,) = report.errors
    assert name in problem and "skipped" in problem and words in problem


def test_text_in_other_encodings_is_still_indexed(tmp_path: Path) -> None:
    course = tmp_path / "course"
    course.mkdir()
    (course / "latin.txt").write_bytes("Le théorème de Pythagore, démontré.".encode("latin-1"))
    (course / "notepad.txt").write_bytes("Recursion needs a base case".encode("utf-16"))
    kb = KnowledgeBase(tmp_path / "home", "k", root=tmp_path)
    report = kb.add_sources([course])
    assert report.added == 2 and report.errors == []
    assert kb.search("pythagore") and kb.search("recursion base case")


class _CountingText(str):
    """A str that adds up how many characters ``count`` scans."""

    scanned = 0

    def count(self, sub: str, start: int | None = None, end: int | None = None) -> int:  # type: ignore[override]
        lo = 0 if start is None else start
        hi = len(self) if end is None else end
        _CountingText.scanned += max(hi - lo, 0)
        return super().count(sub, start, end)


def test_line_numbers_are_counted_in_one_pass(tmp_path: Path) -> None:
    lines = [f"line {i} " + "word " * (i % 40) for i in range(20_000)]
    text = _CountingText("\n".join(lines))
    _CountingText.scanned = 0
    pieces = ingest._pieces_with_lines(text, 1, title="t", kind="text")
    assert len(pieces) > 100
    assert _CountingText.scanned <= len(text)  # was the sum of all offsets: quadratic
    for piece in pieces:  # and the numbers are still right
        assert lines[piece.line - 1] == piece.text.lstrip("\n").split("\n")[0]


def test_progress_moves_inside_a_big_file(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_text(("gradient descent step\n" * 40 + "\n") * 3000, encoding="utf-8")
    kb = KnowledgeBase(tmp_path / "home", "k", root=tmp_path)
    steps: list[tuple[int, int, str]] = []
    kb.add_sources([big], progress=lambda *step: steps.append(step))
    size = big.stat().st_size
    inside = [s for s in steps if 0 < s[0] < size and s[2] == "big.txt"]
    assert len(inside) >= 2 and steps[-1] == (size, size, "big.txt")


def test_the_ascii_fast_path_splits_words_like_the_pattern() -> None:
    import random
    import string
    import unicodedata

    from deeptutor_jupyter.knowledge.tokenize import STOPWORDS, _token, tokenize

    rng = random.Random(5)
    for _ in range(3000):
        text = "".join(rng.choice(string.printable) for _ in range(rng.randint(0, 80)))
        folded = unicodedata.normalize("NFKC", text).lower()
        assert tokenize(text) == [t for t in _token().findall(folded) if t not in STOPWORDS]
    assert tokenize("Read_CSV the ＡＢＣ 循环") == ["read", "csv", "abc", "循", "环"]


def test_our_matrix_scores_like_bm25s(tmp_path: Path) -> None:
    import bm25s  # type: ignore[import-untyped]
    import numpy as np

    from deeptutor_jupyter.knowledge.tokenize import tokenize

    _course, kb = _indexed(tmp_path, n=40)
    tokens = [tokenize(f"{c.title}\n{c.text}") for c in iter_chunks(kb.folder)]
    reference = bm25s.BM25()
    reference.index(tokens, show_progress=False)
    ours = kb._loaded().index
    for query in QUERIES:
        words = tokenize(query)
        expected = reference.get_scores(words)
        got = ours.scores([ours.vocab[w] for w in words if w in ours.vocab])
        assert np.allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_new_docs_are_counted_the_same_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    import random
    from array import array

    import numpy as np

    from deeptutor_jupyter.knowledge import rebuild
    from deeptutor_jupyter.knowledge.tokenize import Vocabulary

    def joined(parts: list[Any], n_docs: int) -> tuple[Any, ...]:
        build = rebuild.Build(counted=parts, new_docs=n_docs)
        return rebuild._new_docs(build, vocab)

    rng = random.Random(3)
    for trial in range(20):
        vocab = Vocabulary()
        docs = []
        for _ in range(rng.randint(0, 40)):
            words = [f"w{rng.randint(0, 300)}" for _ in range(rng.randint(0, 50))]
            docs.append([vocab[w] for w in words] + [vocab["the"]])  # a stopword, dropped
        ids = array("i", [i for doc in docs for i in doc])
        lengths = array("q", [len(doc) for doc in docs])
        monkeypatch.setattr(rebuild, "_BATCH_TOKENS", 1 << 30)
        whole = joined(rebuild.count_docs(ids, lengths, vocab), len(docs))
        monkeypatch.setattr(rebuild, "_BATCH_TOKENS", rng.randint(1, 60))
        batched = joined(rebuild.count_docs(ids, lengths, vocab), len(docs))
        assert all(np.array_equal(a, b) for a, b in zip(whole, batched, strict=True)), trial
        # Counted as they come, a few docs at a time, as a file's chunks are tokenised: the
        # waiting ids are counted once a batch is full, the rest when the index is assembled.
        build = rebuild.Build()
        at = 0
        while at < len(docs):
            some = docs[at : at + rng.randint(1, 5)]
            for doc in some:
                build.ids.extend(doc)
            build.tokenised([len(doc) for doc in some], vocab)
            at += len(some)
            assert len(build.ids) < rebuild._BATCH_TOKENS  # never every id of the file
        assert bool(build.counted) == (len(ids) >= rebuild._BATCH_TOKENS)
        streamed = rebuild._new_docs(build, vocab)
        assert all(np.array_equal(a, b) for a, b in zip(whole, streamed, strict=True)), trial
        monkeypatch.setattr(rebuild, "_INT32_KEYS", 0)  # int64 keys, as a big corpus has
        wide = joined(rebuild.count_docs(ids, lengths, vocab), len(docs))
        monkeypatch.setattr(rebuild, "_INT32_KEYS", 2**31)
        assert all(np.array_equal(a, b) for a, b in zip(whole, wide, strict=True)), trial
        assert len(whole[0]) == len(docs) + 1


@pytest.mark.parametrize("block", [2048, 1, 3])  # words looked up at a time
def test_appended_token_ids_are_the_token_ids(monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    import importlib
    from array import array

    from deeptutor_jupyter.knowledge.tokenize import Vocabulary, append_token_ids, token_ids

    # the module, not the package's ``tokenize`` function of the same name
    module = importlib.import_module("deeptutor_jupyter.knowledge.tokenize")
    monkeypatch.setattr(module, "_LOOKUP_BLOCK", block)
    texts = ["Read_CSV the ＡＢＣ 循环", "", "gradient DESCENT, gradient!", "a an the", "x y z w"]
    expected, got = Vocabulary(), Vocabulary()
    ids = array("i")
    wanted = [token_ids(text, expected) for text in texts]
    assert append_token_ids(ids, texts[:1], got) == [len(wanted[0])]
    assert append_token_ids(ids, texts[1:], got) == [len(w) for w in wanted[1:]]
    assert ids.tolist() == [i for w in wanted for i in w]
    assert got == expected and got.terms() == list(expected)


def test_a_vocabulary_round_trips_through_its_terms() -> None:
    from deeptutor_jupyter.knowledge.tokenize import Vocabulary, token_ids

    vocab = Vocabulary()
    token_ids("eigenvalues of a symmetric matrix, eigenvalues again", vocab)
    again = Vocabulary(vocab.terms())
    assert again == vocab and again.n_stop == vocab.n_stop


def test_a_refresh_with_nothing_changed_opens_no_index_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.knowledge import arrays, storage

    course, kb = _indexed(tmp_path)
    kb_base._VOCABULARIES.clear()  # as in a fresh kernel: nothing kept from the add
    opened: list[str] = []
    real_open, real_vocab = arrays.open_arrays, storage.load_vocab
    monkeypatch.setattr(arrays, "open_arrays", lambda p: opened.append(p.name) or real_open(p))
    monkeypatch.setattr(
        storage, "load_vocab", lambda f, m: opened.append("vocab") or real_vocab(f, m)
    )
    assert kb.refresh().unchanged == 30
    assert opened == []
    _touch(course / "n003.md", "# Changed\n\nsorting lists of words\n")
    assert kb.refresh().updated == 1
    opened_parts = {f.partition(".")[0] for f in opened}  # delta.<generation>.arrays: delta
    assert "vocab" in opened and {"delta", "basedoc"} <= opened_parts
    assert "base" not in opened_parts  # the postings only a search reads


def test_damage_found_when_a_refresh_opens_the_arrays_rebuilds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.knowledge import storage

    course, kb = _indexed(tmp_path)
    real = storage.load_vocab
    calls: list[int] = []

    def damaged_once(folder: Path, manifest: dict[str, Any]) -> list[str]:
        calls.append(1)
        if len(calls) == 1:
            raise storage.CorruptIndex("vocab.json cannot be parsed (test)")
        return real(folder, manifest)

    monkeypatch.setattr(storage, "load_vocab", damaged_once)
    kb_base._VOCABULARIES.clear()  # read from the file, as in a fresh kernel
    _touch(course / "n004.md", "# Changed\n\nmatrix rank, rewritten\n")
    report = kb.refresh()
    assert report.rebuilt_from_corruption and report.errors == []
    assert (report.added, report.chunks) == (30, kb.info()["chunks"])
    fresh = KnowledgeBase(tmp_path / "home2", "inc", root=tmp_path)
    fresh.add_sources([course])
    assert _results(kb) == _results(fresh)
    assert kb.verify() is None


def test_a_reader_of_the_previous_manifest_still_finds_its_index_files(tmp_path: Path) -> None:
    from deeptutor_jupyter.knowledge import storage

    course, kb = _indexed(tmp_path)

    def manifest() -> dict[str, Any]:
        return dict(json.loads((kb.folder / "manifest.json").read_bytes()))

    first = manifest()
    _touch(course / "n001.md", "# Changed\n\nmatrix rank once\n")
    kb.refresh()
    second = manifest()
    assert set(first["index_files"]) != set(second["index_files"])
    # Read with the manifest it had before the refresh: every file it names is still there.
    index = storage._open_index(kb.folder / "index", storage.index_names(first))
    assert index.rows == first["rows"]
    _touch(course / "n002.md", "# Changed\n\nmatrix rank twice\n")
    kb.refresh()
    present = {p.name for p in (kb.folder / "index").iterdir()}
    # The files of the last two manifests, and nothing older.
    assert present == set(second["index_files"]) | set(manifest()["index_files"])
    assert set(first["index_files"]) - present
    assert kb.verify() is None


def test_a_kept_vocabulary_is_used_only_while_it_is_the_one_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.knowledge import storage

    course, kb = _indexed(tmp_path)
    stale = kb_base._VOCABULARIES[kb.folder]
    reads: list[int] = []
    real = storage.load_vocab
    monkeypatch.setattr(storage, "load_vocab", lambda f, m: reads.append(1) or real(f, m))
    # The same process refreshes again: the vocabulary it wrote is copied, not read.
    _touch(course / "n001.md", "# Changed\n\nquaternions rotate vectors\n")
    kb.refresh()
    assert reads == []
    # Another writer's vocabulary is on disk now (simulated: this process forgot its own),
    # and the one kept here is older: it is not used.
    kb_base._VOCABULARIES.clear()
    _touch(course / "n002.md", "# Changed\n\nmonads compose effects\n")
    kb.refresh()
    assert reads == [1]
    kb_base._VOCABULARIES[kb.folder] = stale
    _touch(course / "n003.md", "# Changed\n\nquaternions and monads together\n")
    report = kb.refresh()
    assert reads == [1, 1] and not report.rebuilt_from_corruption
    full = KnowledgeBase(tmp_path / "home2", "full", root=tmp_path)
    full.add_sources([course])
    assert _results(kb) == _results(full)
    assert kb.search("quaternions monads")[0].chunk.path == "course/n003.md"


def test_only_a_change_of_sources_waits_for_the_manifest_rename_to_be_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter import _files

    synced: list[str] = []
    real = _files.fsync_dir
    monkeypatch.setattr(_files, "fsync_dir", lambda d: synced.append(d.name) or real(d))
    course, kb = _indexed(tmp_path, n=4)
    assert synced == ["inc"]  # a new list of sources
    _touch(course / "n001.md", "# Changed\n\nmatrix rank\n")
    kb.refresh()
    assert synced == ["inc"]  # a refresh: a crash would only lose what the next one redoes
    more = _corpus(tmp_path / "more", n=1)
    kb.add_sources([more])
    assert synced == ["inc", "inc"]


def _sort_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records the length of every comparison sort numpy does from now on (``np.unique``,
    and ``np.argsort``/``np.sort`` unless they are a radix sort of 16-bit keys)."""
    import numpy as np

    sizes: list[int] = []

    def recording(real: Any, always: bool) -> Any:
        def sort(a: Any, *args: Any, **kwargs: Any) -> Any:
            a = np.asarray(a)
            radix = kwargs.get("kind") == "stable" and a.dtype.itemsize <= 2
            if always or not radix:
                sizes.append(a.size)
            return real(a, *args, **kwargs)

        return sort

    monkeypatch.setattr(np, "unique", recording(np.unique, True))
    monkeypatch.setattr(np, "argsort", recording(np.argsort, False))
    monkeypatch.setattr(np, "sort", recording(np.sort, False))
    return sizes


def test_indexing_a_file_4x_as_big_does_at_most_4_2x_the_sorting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 28: ingest 4 MB -> 16 MB took 4.6-5.2x, because one comparison sort ran over every
    # posting of the file (n log n, and out of cache). Every sort is now of a bounded batch, or
    # a radix sort: the sorting grows with the file, as n log n of a constant n does.
    import math

    from deeptutor_jupyter.knowledge import rebuild

    monkeypatch.setattr(rebuild, "_BATCH_TOKENS", 1 << 12)  # small files, the same shape
    words = [f"w{i}{chr(97 + i % 26)}" for i in range(3000)]
    work: dict[int, float] = {}
    for scale in (1, 4):
        source = tmp_path / f"notes{scale}.txt"
        paragraphs = (
            " ".join(words[(p * 7 + j * j) % len(words)] for j in range(60))
            for p in range(200 * scale)
        )
        source.write_text("\n\n".join(paragraphs), encoding="utf-8")
        sizes = _sort_sizes(monkeypatch)
        kb = KnowledgeBase(tmp_path / f"home{scale}", "k", root=tmp_path)
        assert kb.add_sources([source]).chunks > 0
        monkeypatch.undo()
        monkeypatch.setattr(rebuild, "_BATCH_TOKENS", 1 << 12)
        assert sizes and max(sizes) <= 1 << 13, max(sizes)  # no sort of all the postings
        work[scale] = sum(n * math.log2(max(n, 2)) for n in sizes)
    assert work[4] <= 4.2 * work[1], work


def test_postings_are_ordered_by_term_also_past_16_bit_ids() -> None:
    import numpy as np

    from deeptutor_jupyter.knowledge.bm25 import lengths, postings

    rng = np.random.default_rng(4)
    ptr = np.array([0, 3, 3, 7, 10], dtype=np.int64)
    for top in (300, 200_000):  # one radix pass, and two
        terms = rng.integers(0, top, 10).astype(np.int32)
        tfs = rng.integers(1, 5, 10).astype(np.int32)
        indptr, rows, by_term = postings(ptr, terms, tfs, top)
        doc = np.repeat(np.arange(4), np.diff(ptr))
        expected = sorted(zip(terms.tolist(), doc.tolist(), tfs.tolist(), strict=True))
        got = [
            (t, int(rows[i]), int(by_term[i]))
            for t in np.flatnonzero(np.diff(indptr)).tolist()
            for i in range(indptr[t], indptr[t + 1])
        ]
        assert got == expected
    assert lengths(ptr, np.arange(1, 11, dtype=np.int32)).tolist() == [6, 0, 22, 27]


def test_a_refresh_of_the_paths_that_changed_matches_a_full_rebuild(tmp_path: Path) -> None:
    course, kb = _indexed(tmp_path)
    week = course / "week2"
    week.mkdir()
    (week / "a.md").write_text("# A\n\neigenvalues in week two\n", encoding="utf-8")
    (week / "b.md").write_text("# B\n\nsorting lists in week two\n", encoding="utf-8")
    report = kb.refresh(paths=[week])  # a new folder, walked
    assert (report.added, report.unchanged) == (2, 30)
    _touch(course / "n004.md", "# Changed\n\nmatrix rank and gradient descent, rewritten\n")
    (course / "n010.md").unlink()
    (week / "b.md").unlink()
    _touch(course / "zz-added.md", "# Added\n\neigenvalues of a symmetric matrix\n")
    outside = tmp_path / "elsewhere.md"
    outside.write_text("# Not a source\n", encoding="utf-8")
    paths = [course / "n004.md", course / "n010.md", course / "zz-added.md", week, outside]
    report = kb.refresh(paths=paths)
    assert (report.updated, report.removed, report.added, report.unchanged) == (1, 2, 1, 29)
    assert report.errors == [f"{outside}: not inside a source of this knowledge base"]
    assert kb.refresh(paths=[course / ".hidden.md", course / "n001.md"]).unchanged == 31

    full = KnowledgeBase(tmp_path / "home2", "full", root=tmp_path)
    full.add_sources([course])
    assert _results(kb) == _results(full)
    assert [c.chunk_id for c in iter_chunks(kb.folder)] == [
        c.chunk_id for c in iter_chunks(full.folder)
    ]
    assert kb.verify() is None and kb.info()["files"] == full.info()["files"] == 31
    assert kb.refresh().changed is False  # a full pass finds nothing left behind


def _costs(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Counts from now on: paths stat-ed, folders listed, pieces of the file table read."""
    from deeptutor_jupyter.knowledge import shards

    seen: dict[str, list[Any]] = {"stat": [], "listed": [], "pieces": []}
    for name, kind in (("stat", "stat"), ("lstat", "stat"), ("scandir", "listed")):
        real = getattr(os, name)

        def counted(path: Any, *a: Any, _real: Any = real, _kind: str = kind, **kw: Any) -> Any:
            seen[_kind].append(path)
            return _real(path, *a, **kw)

        monkeypatch.setattr(os, name, counted)
    real_read = shards.read_pieces

    def read(folder: Path, manifest: dict[str, Any], keys: Any, checksum: Any) -> Any:
        out = real_read(folder, manifest, keys, checksum)
        seen["pieces"] += list(out)
        return out

    monkeypatch.setattr(shards, "read_pieces", read)
    return seen


def test_a_one_file_refresh_costs_the_same_in_a_corpus_ten_times_as_big(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 28: a one-file refresh cost ~4% of a full index at every size, because it stat-ed
    # every file and rewrote a table of every file. Given the changed path, it stats that
    # path, reads and rewrites the one piece of the table holding it.
    from deeptutor_jupyter.knowledge import shards

    monkeypatch.setattr(shards, "TARGET", 8)  # pieces of 8-16 files: many at these sizes
    cost: dict[int, dict[str, Any]] = {}
    for n in (40, 400):
        (tmp_path / str(n)).mkdir()
        course, kb = _indexed(tmp_path / str(n), n=n)
        tables, index = kb.folder / "tables", kb.folder / "index"
        before, index_before = set(os.listdir(tables)), set(os.listdir(index))
        assert len(before) >= n // 16
        _touch(course / "n007.md", "# Note\n\nmatrix rank note\n")  # words it knows
        seen = _costs(monkeypatch)
        report = kb.refresh(paths=[course / "n007.md"])
        monkeypatch.undo()
        monkeypatch.setattr(shards, "TARGET", 8)
        assert (report.updated, report.unchanged) == (1, n - 1)
        written = set(os.listdir(tables)) - before
        (delta,) = set(os.listdir(index)) - index_before  # the vocabulary did not grow
        cost[n] = {
            "index bytes": (index / delta).stat().st_size,
            "course paths stat-ed": len([p for p in seen["stat"] if str(course) in str(p)]),
            "folders listed": len(seen["listed"]),
            "pieces read": len(seen["pieces"]),
            "pieces written": len(written),
            "piece bytes": sum((tables / name).stat().st_size for name in written),
        }
        assert kb.search("rank note")[0].chunk.path.endswith("n007.md")
    small, big = cost[40], cost[400]
    assert big["course paths stat-ed"] == small["course paths stat-ed"] <= 8, cost
    assert big["folders listed"] == small["folders listed"] == 0, cost
    assert big["pieces read"] == small["pieces read"] == 1, cost
    assert big["pieces written"] == small["pieces written"] == 1, cost
    assert big["piece bytes"] <= 2.5 * small["piece bytes"], cost  # a piece: 8-16 files
    # The delta, the dead rows and the df changes: sized by the change, not by the index.
    assert big["index bytes"] <= 1.2 * small["index bytes"], cost


def test_a_big_folder_is_split_into_pieces_of_a_bounded_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.knowledge import shards

    monkeypatch.setattr(shards, "TARGET", 4)
    course, kb = _indexed(tmp_path, n=30)
    manifest = json.loads((kb.folder / "manifest.json").read_bytes())
    assert manifest["buckets"] == {"course": 8}
    assert all(count <= 8 for _, _, count in manifest["shards"].values())
    assert sorted(file_table(kb.folder)["path"]) == sorted(
        f"course/{p.name}" for p in course.iterdir()
    )
    for i in range(30, 60):  # the folder grows past twice the pieces' size: split again
        (course / f"n{i:03d}.md").write_text(f"# Note {i}\n\nwhile loops {i}\n", encoding="utf-8")
    kb.refresh()
    manifest = json.loads((kb.folder / "manifest.json").read_bytes())
    assert manifest["buckets"] == {"course": 16} and manifest["n_files"] == 60
    assert all(count <= 8 for _, _, count in manifest["shards"].values())
    _touch(course / "n045.md", "# Changed\n\neigenvalues again\n")
    assert kb.refresh(paths=[course / "n045.md"]).updated == 1
    assert kb.verify() is None and len(file_table(kb.folder)["path"]) == 60


def test_a_refresh_that_fails_takes_back_the_terms_it_added_to_the_kept_vocabulary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kept vocabulary is used in place, not copied: a refresh that does not write it must
    # not leave its new terms in it, or the next refresh would think them on disk.
    from deeptutor_jupyter.knowledge import storage

    course, kb = _indexed(tmp_path, n=5)
    _touch(course / "n001.md", "# One\n\nzyzzyva quokka\n")
    real = storage.save_index

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise OSError("disk full")

    monkeypatch.setattr(storage, "save_index", fail)
    with pytest.raises(OSError):
        kb.refresh()
    monkeypatch.setattr(storage, "save_index", real)
    assert "zyzzyva" not in kb_base._VOCABULARIES[kb.folder][1]
    assert kb.refresh().updated == 1
    assert kb.verify() is None
    assert kb.search("zyzzyva")[0].chunk.path == "course/n001.md"


def test_a_refresh_of_one_path_that_rebuilds_the_base_moves_every_files_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.knowledge import bm25, shards

    monkeypatch.setattr(shards, "TARGET", 4)  # pieces of 4-8 files: most are not read
    course, kb = _indexed(tmp_path, n=30)
    monkeypatch.setattr(bm25, "REBUILD_SHARE", 0.0)  # every change rebuilds the base
    for name in ("n004.md", "n017.md"):  # the second reads the rows the first wrote
        _touch(course / name, f"# Changed\n\nmatrix rank rewritten in {name}\n")
        assert kb.refresh(paths=[course / name]).updated == 1
        assert kb.verify() is None
    full = KnowledgeBase(tmp_path / "home2", "full", root=tmp_path)
    full.add_sources([course])
    assert _results(kb) == _results(full)


def test_a_full_pass_rewrites_only_the_piece_of_the_file_that_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.knowledge import bm25, shards

    monkeypatch.setattr(shards, "TARGET", 4)
    course, kb = _indexed(tmp_path, n=30)
    tables = kb.folder / "tables"
    for name in ("n000.md", "n013.md", "n029.md"):  # a first, a middle and a last piece
        before = set(os.listdir(tables))
        _touch(course / name, f"# Changed\n\nquokka notes in {name}\n")
        monkeypatch.setattr(bm25, "REBUILD_SHARE", 1.0)
        seen = _costs(monkeypatch)
        assert kb.refresh().updated == 1
        monkeypatch.undo()
        monkeypatch.setattr(shards, "TARGET", 4)
        monkeypatch.setattr(bm25, "REBUILD_SHARE", 1.0)  # no base rebuild: it rewrites all
        assert len(seen["pieces"]) == len(
            json.loads((kb.folder / "manifest.json").read_bytes())["shards"]
        )
        assert len(set(os.listdir(tables)) - before) == 1, name  # one piece written
        assert kb.verify() is None and len(file_table(kb.folder)["path"]) == 30
        assert kb.search(f"quokka {name}")[0].chunk.path == f"course/{name}"
