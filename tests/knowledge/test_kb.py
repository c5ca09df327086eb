"""KnowledgeBase: search, incremental re-index by hash, damage detection and recovery."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.knowledge import (
    Hit,
    KnowledgeBase,
    KnowledgeBaseNotFound,
    KnowledgeIndexError,
    list_kbs,
    remove_kb,
)
from deeptutor_jupyter.knowledge import base as kb_base
from tests.knowledge.helpers import (
    file_entries,
    file_table,
    index_file,
    write_notebook,
    write_pdf,
)


@pytest.fixture
def course(tmp_path: Path) -> Path:
    src = tmp_path / "course"
    src.mkdir()
    (src / "loops.md").write_text(
        "# Loops\n\n## For loops\n\nA for loop iterates over a list.\n\n"
        "## While loops\n\nA while loop repeats until its condition becomes false.\n",
        encoding="utf-8",
    )
    recursion = "# 递归\n\n递归函数调用自身，需要一个终止条件。\n"
    (src / "递归.md").write_text(recursion, encoding="utf-8")
    (src / "geometry.py").write_text(
        "def hypotenuse(a, b):\n    return (a * a + b * b) ** 0.5\n", encoding="utf-8"
    )
    write_notebook(
        src / "lesson.ipynb",
        [("markdown", "# Dictionaries\n\nKeys map to values."), ("code", "ages = {'ann': 3}")],
    )
    write_pdf(src / "slides.pdf", ["Intro slide", "Matrix multiplication rules"])
    hidden = src / ".ipynb_checkpoints"
    hidden.mkdir()
    (hidden / "loops-checkpoint.md").write_text("# Loops\n\nstale copy", encoding="utf-8")
    (src / "notes.docx").write_bytes(b"not supported, silently skipped in folders")
    return src


@pytest.fixture
def kb(tmp_path: Path, course: Path) -> KnowledgeBase:
    kb = KnowledgeBase(tmp_path / "home", "course", root=tmp_path)
    report = kb.add_sources([course])
    assert (report.added, report.errors, report.rebuilt_from_corruption) == (5, [], False)
    return kb


def top(kb: KnowledgeBase, query: str) -> Hit:
    hits = kb.search(query)
    assert hits, f"no hit for {query!r}"
    return hits[0]


def test_search_ranks_the_right_chunk_first(kb: KnowledgeBase) -> None:
    hit = top(kb, "while condition")
    assert hit.chunk.title == "Loops > While loops"
    assert hit.source() == {
        "kb": "course",
        "file": "course/loops.md",
        "cell": None,
        "page": None,
        "chunk_id": hit.chunk.chunk_id,
        "score": round(hit.score, 4),
    }
    assert hit.link() == "lab/tree/course/loops.md#line=6"
    assert top(kb, "hypotenuse").chunk.path == "course/geometry.py"
    scores = [h.score for h in kb.search("loop")]
    assert scores == sorted(scores, reverse=True)


def test_notebook_and_pdf_hits_carry_cell_and_page(kb: KnowledgeBase, tmp_path: Path) -> None:
    cell = top(kb, "ages dictionary")
    assert (cell.chunk.cell, cell.chunk.kind) == (1, "code")
    assert cell.link() == "lab/tree/course/lesson.ipynb#cell-id=c1"
    page = top(kb, "matrix multiplication")
    assert page.source()["page"] == 2
    assert page.link() == "lab/tree/course/slides.pdf#page=2"
    # Relative to a Jupyter server started one level up, and for a server root elsewhere.
    assert page.link(tmp_path.parent).startswith(f"lab/tree/{tmp_path.name}/course/slides.pdf")
    assert page.link("/somewhere/else") == "lab/tree/course/slides.pdf#page=2"


def test_chinese_query(kb: KnowledgeBase) -> None:
    hit = top(kb, "什么是递归的终止条件？")
    assert hit.chunk.path == "course/递归.md"
    assert hit.link() == "lab/tree/course/%E9%80%92%E5%BD%92.md#line=0"


def test_no_match_and_empty_query_give_nothing(kb: KnowledgeBase) -> None:
    assert kb.search("zzzyyyxxx") == []
    assert kb.search("   ") == []
    assert kb.search("the of and") == []  # stopwords only


def test_hidden_and_unsupported_files_are_skipped(kb: KnowledgeBase) -> None:
    assert kb.info()["files"] == 5
    assert all("checkpoint" not in h.chunk.path for h in kb.search("stale copy loops"))


def test_unchanged_files_are_not_rechunked(
    kb: KnowledgeBase, course: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    real = kb_base.ingest_file

    def counting(path: Path, root: Path, name: str, **kw: Any) -> list[object]:
        seen.append(Path(path).name)
        return real(path, root, name, **kw)  # type: ignore[return-value]

    monkeypatch.setattr(kb_base, "ingest_file", counting)
    report = kb.refresh()
    assert (report.unchanged, report.added, report.updated, seen) == (5, 0, 0, [])

    (course / "loops.md").write_text("# Loops\n\nNow about generators only.\n", encoding="utf-8")
    report = kb.refresh()
    assert seen == ["loops.md"]
    assert (report.updated, report.unchanged, report.removed) == (1, 4, 0)
    assert top(kb, "generators").chunk.path == "course/loops.md"
    assert kb.search("while condition") == []


def test_deleted_and_new_files(kb: KnowledgeBase, course: Path) -> None:
    before = kb.info()["chunks"]
    (course / "geometry.py").unlink()
    (course / "extra.txt").write_text("Binary search halves the interval.", encoding="utf-8")
    progress: list[tuple[int, int, str]] = []
    report = kb.refresh(progress=lambda *step: progress.append(step))
    assert (report.removed, report.added, report.unchanged) == (1, 1, 4)
    assert kb.search("hypotenuse") == []
    assert top(kb, "binary search").chunk.path == "course/extra.txt"
    assert kb.info()["chunks"] == before
    total = sum(p.stat().st_size for p in course.iterdir() if p.suffix != ".docx" and p.is_file())
    assert progress[0] == (0, total, "") and progress[-1][:2] == (total, total)
    assert [step[0] for step in progress] == sorted(step[0] for step in progress)


def test_adding_more_sources_keeps_the_old_ones(kb: KnowledgeBase, tmp_path: Path) -> None:
    extra = tmp_path / "extra.md"
    extra.write_text("# Sets\n\nA set has no duplicates.", encoding="utf-8")
    report = kb.add_sources([extra])
    assert (report.added, report.unchanged) == (1, 5)
    assert len(kb.info()["sources"]) == 2
    assert top(kb, "duplicates").chunk.path == "extra.md"


def test_missing_and_unsupported_sources_are_reported(tmp_path: Path) -> None:
    odd = tmp_path / "x.docx"
    odd.write_bytes(b"?")
    kb = KnowledgeBase(tmp_path / "home", "k", root=tmp_path)
    report = kb.add_sources([tmp_path / "missing", odd])
    assert len(report.errors) == 2
    assert "not found" in report.errors[0] and "unsupported" in report.errors[1]
    assert kb.search("anything") == []


def test_a_bad_file_is_reported_and_the_rest_indexed(tmp_path: Path, course: Path) -> None:
    (course / "broken.ipynb").write_text("{", encoding="utf-8")
    kb = KnowledgeBase(tmp_path / "home", "k", root=tmp_path)
    report = kb.add_sources([course])
    assert report.added == 5 and len(report.errors) == 1 and "broken.ipynb" in report.errors[0]


def _index_file(kb: KnowledgeBase, name: str = "base") -> Path:
    return index_file(kb.folder, name)


def _store(kb: KnowledgeBase) -> Path:
    manifest = json.loads((kb.folder / "manifest.json").read_text(encoding="utf-8"))
    return kb.folder / manifest["store"]


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    [
        lambda kb: _index_file(kb).write_bytes(_index_file(kb).read_bytes()[:40]),
        lambda kb: _index_file(kb, "vocab").write_text("{garbled", encoding="utf-8"),
        lambda kb: _store(kb).write_text("", encoding="utf-8"),
        lambda kb: [p.unlink() for p in (kb.folder / "index").iterdir()],
        lambda kb: _flip_last_byte(_store(kb)),
        lambda kb: _flip_last_byte(_index_file(kb, "basedoc")),
    ],
    ids=[
        "truncated-array",
        "garbled-vocab",
        "empty-chunks",
        "index-gone",
        "flipped-chunk-byte",
        "flipped-term-array",
    ],
)
def test_damaged_index_is_detected_and_rebuilt(kb: KnowledgeBase, damage: object) -> None:
    damage(kb)  # type: ignore[operator]
    assert kb.verify() is not None
    report = kb.refresh()
    assert report.rebuilt_from_corruption and report.added + report.updated == 5
    assert "rebuilt" in report.summary()
    assert kb.verify() is None
    assert top(kb, "while condition").chunk.title == "Loops > While loops"


def test_search_never_uses_a_damaged_index(tmp_path: Path, kb: KnowledgeBase) -> None:
    kb.search("loop")  # load it into memory first
    fresh = KnowledgeBase(tmp_path / "home", "course")
    _index_file(fresh).write_bytes(b"\x93NUMPY garbage")
    hit = top(fresh, "while condition")
    assert hit.chunk.title == "Loops > While loops"
    assert fresh.last_report is not None and fresh.last_report.rebuilt_from_corruption
    # The manifest changed on disk, so the earlier instance reloads instead of trusting memory.
    assert top(kb, "while condition").chunk.title == "Loops > While loops"


def test_damaged_index_with_sources_gone_raises(kb: KnowledgeBase, course: Path) -> None:
    _index_file(kb).write_bytes(b"broken")
    for path in sorted(course.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    course.rmdir()
    with pytest.raises(KnowledgeIndexError, match="none of its sources exist"):
        kb.search("loop")
    with pytest.raises(KnowledgeIndexError, match="cannot be rebuilt"):
        kb.refresh()


def test_unreadable_manifest_raises_with_advice(kb: KnowledgeBase, tmp_path: Path) -> None:
    (kb.folder / "manifest.json").write_text("{half", encoding="utf-8")
    fresh = KnowledgeBase(tmp_path / "home", "course")
    with pytest.raises(KnowledgeIndexError, match="kb remove course"):
        fresh.search("loop")
    assert "problem" in fresh.info()


def test_leftover_staging_folder_does_not_matter(kb: KnowledgeBase, course: Path) -> None:
    (kb.folder / ".index-new-dead").mkdir()
    (course / "loops.md").write_text("# Changed\n\nfresh words", encoding="utf-8")
    kb.refresh()
    assert not (kb.folder / ".index-new-dead").exists()
    assert kb.verify() is None


def test_manifest_records_hashes_and_counts(kb: KnowledgeBase) -> None:
    manifest = json.loads((kb.folder / "manifest.json").read_text(encoding="utf-8"))
    entry = file_entries(kb.folder)["course/loops.md"]
    assert len(entry["sha256"]) == 64 and entry["chunks"] == 2
    assert manifest["chunks"] == sum(file_table(kb.folder)["chunks"])
    # Each index file named by the write that made it; a fresh index has only its own.
    assert set(manifest["index_files"]) == {p.name for p in (kb.folder / "index").iterdir()}
    assert len({name.split(".")[1] for name in manifest["index_files"]}) == 1


@pytest.mark.parametrize("name", ["", "a b", "../x", "x/y", "é", "a" * 65, ".hidden"])
def test_invalid_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="Invalid knowledge base name"):
        KnowledgeBase(tmp_path, name)
    with pytest.raises(ValueError, match="Invalid knowledge base name"):
        remove_kb(tmp_path, name)


def test_list_and_remove(kb: KnowledgeBase, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "kb" / ".removing-old").mkdir()
    (listed,) = list_kbs(home)
    assert listed["name"] == "course" and listed["files"] == 5 and listed["chunks"] > 5
    assert listed["sources"] == [str((tmp_path / "course").resolve())]
    remove_kb(home, "course")
    assert list_kbs(home) == []
    with pytest.raises(KnowledgeBaseNotFound):
        remove_kb(home, "course")
    with pytest.raises(KnowledgeBaseNotFound, match="kb add"):
        kb.search("loop")
    assert list_kbs(tmp_path / "nowhere") == []


def test_importing_the_packages_stays_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, deeptutor_jupyter.knowledge as k, deeptutor_jupyter.skills as s\n"
        "heavy = [m for m in ('numpy', 'bm25s', 'pypdf', 'pydantic') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert all(hasattr(k, n) for n in k.__all__), k.__all__\n"
        "assert all(hasattr(s, n) for n in s.__all__), s.__all__\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_report_counts_in_words():
    from deeptutor_jupyter.knowledge.model import IndexReport

    one = IndexReport(added=1, chunks=1, errors=["a.pdf: unreadable"]).summary()
    assert one == "1 added, 0 updated, 0 removed, 0 unchanged, 1 chunk; 1 problem"
    many = IndexReport(added=2, chunks=3, errors=["a", "b"]).summary()
    assert many.endswith("3 chunks; 2 problems")
