"""benchmarks/kb.py still runs and prints its labelled lines. No timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "kb.py"


@pytest.fixture(scope="module")
def output() -> str:
    out = subprocess.run(
        [sys.executable, "-W", "error", str(SCRIPT), "--quick"],
        cwd=str(SCRIPT.parent.parent),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, f"kb.py exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
    assert out.stderr == ""  # no progress bars or warnings from bm25s
    return out.stdout


@pytest.mark.parametrize(
    "line",
    [
        "kb benchmark: 100 documents,",
        "report: 100 added, 0 updated, 0 removed, 0 unchanged,",
        "index, ours (read+chunk+hash+bm25s+write):",
        "index, bm25s only (same tokens):",
        "index, rank-bm25 BM25Okapi (same tokens):",
        "query, ours KnowledgeBase.search k=5:  p50",
        "query, rank-bm25 get_scores + top 5:   p50",
        "speed-up (rank-bm25 / ours): p50",
        "same top chunk in both:",
        "RESULT: goal queries >= 10x faster than rank-bm25:",
    ],
)
def test_kb_benchmark_quick(line: str, output: str) -> None:
    assert line in output


def test_corpus_is_deterministic(tmp_path: Path) -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import kb as bench  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(SCRIPT.parent))
    bench.generate_corpus(tmp_path / "a", 5)
    bench.generate_corpus(tmp_path / "b", 5)
    for path in sorted((tmp_path / "a").iterdir()):
        assert path.read_bytes() == (tmp_path / "b" / path.name).read_bytes()


def _run(script: str, *extra: str) -> str:
    out = subprocess.run(
        [sys.executable, "-W", "error", str(SCRIPT.parent / script), "--quick", *extra],
        cwd=str(SCRIPT.parent.parent),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, f"{script} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.fixture(scope="module")
def refresh_output(tmp_path_factory: pytest.TempPathFactory) -> str:
    # --dir: a test writes under its own temp folder, not beside the tutor home
    return _run("kb_refresh.py", "--dir", str(tmp_path_factory.mktemp("kb-refresh")))


@pytest.fixture(scope="module")
def ingest_output() -> str:
    return _run("kb_ingest.py", "--repeat", "2")  # the lines, not the numbers: few adds


@pytest.mark.parametrize(
    "line",
    [
        "kb refresh benchmark: 200 files,",
        "full index (add_sources), median of 1:",
        "reference, bm25s.BM25.index, median of 1:",
        "(not a floor: no chunking, no files)",
        "refresh, 10 files changed:",
        "(anchor ",
        "refresh, nothing changed, first:",
        "refresh, nothing changed:",
        "200 unchanged",
        "refresh, one file changed, median of 2:",
        "each sample:",
        "1 updated, 0 removed, 199 unchanged",
        "refresh(paths=[file]), one changed, median of 2:",
        "refresh(paths=...), 10 files changed:",
        "refresh, one added + one removed:",
        "1 added, 0 updated, 1 removed, 199 unchanged",
        "first search, fresh KnowledgeBase:",
        "list_kbs, this KB:",
        "peak RSS:",
        "RESULT: refresh of one file",
    ],
)
def test_kb_refresh_benchmark_quick(line: str, refresh_output: str) -> None:
    assert line in refresh_output


@pytest.mark.parametrize(
    "line",
    [
        "kb ingest benchmark: 0.0625 MB, 0.25 MB, 1 MB",
        ".txt   1.00 MB: ingest_file",
        ".md    1.00 MB: ingest_file",
        "add_sources",
        "RESULT: .txt add_sources 1 MB / 0.25 MB =",
        "RESULT: .md add_sources 1 MB / 0.25 MB =",
    ],
)
def test_kb_ingest_benchmark_quick(line: str, ingest_output: str) -> None:
    assert line in ingest_output


def test_kb_refresh_growth_quick(tmp_path: Path) -> None:
    out = _run("kb_refresh.py", "--growth", "40,200", "--samples", "1", "--dir", str(tmp_path))
    assert "kb refresh growth: 40, 200 files, median of 1" in out
    assert "one file, given its path" in out and "full pass" in out
    assert "RESULT: one-file refresh given its path at 200 files is" in out
