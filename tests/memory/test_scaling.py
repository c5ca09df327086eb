"""Costs that must not grow with what is kept: L1 appends, L3 reads, merge. Checked by what the
code reads and parses, never by the clock; plus appends from several processes at once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deeptutor_jupyter.memory import Document, Entry, MemoryStore, Section, TraceRecord, render
from deeptutor_jupyter.memory import store as store_module
from deeptutor_jupyter.memory import trace as trace_module
from deeptutor_jupyter.memory.consolidate import consolidate

REPO = Path(__file__).resolve().parents[2]
DAY = 86_400.0


def record(i: int, *, day: int = 0) -> TraceRecord:
    start = 1_760_000_000.0 + day * DAY + i
    return TraceRecord(
        trace_id=f"t_{day}_{i}",
        session_id="s",
        turn_id=str(i),
        model="m",
        started_at=start,
        finished_at=start + 1,
        question="q",
        answer_summary="a",
    )


def test_an_append_reads_only_the_new_bytes_of_its_own_day(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    MemoryStore(tmp_path).emit_many([record(i, day=d) for d in range(5) for i in range(200)])
    read: list[tuple[str, int]] = []
    real = trace_module.TraceLog._read_new

    def spy(self: trace_module.TraceLog, path: Path, state: trace_module._FileState) -> None:
        before = state.offset
        real(self, path, state)
        read.append((path.stem, state.offset - before))

    monkeypatch.setattr(trace_module.TraceLog, "_read_new", spy)
    store = MemoryStore(tmp_path)  # a fresh kernel
    assert store.emit(record(1000, day=4))
    assert [day for day, _ in read] == ["2025-10-13"]  # not the four other days
    read.clear()
    assert store.emit(record(1001, day=4))
    (only,) = read
    line = store._traces.files()[-1].read_bytes().splitlines(keepends=True)[-2]
    assert only == ("2025-10-13", len(line))  # the one line appended since, not the day
    assert not store.emit(record(5, day=4))  # still deduplicated
    assert not store.emit(record(5, day=0))
    assert len(store.traces()) == 1002
    assert "t_2_7" in store.known_trace_ids()


def test_the_first_append_of_a_turns_own_trace_reads_nothing_of_the_day(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    MemoryStore(tmp_path).emit_many([record(i) for i in range(2_000)])
    opened: list[Path] = []
    real_open = Path.open

    def spy_open(self: Path, mode: str = "r", *args: object, **kwargs: object) -> object:
        if "r" in mode:
            opened.append(self)
        return real_open(self, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", spy_open)
    store = MemoryStore(tmp_path)  # a fresh kernel, a day of 2,000 traces
    mine = record(5_000).model_copy(update={"trace_id": trace_module.new_trace_id()})
    assert store.emit(mine)
    assert opened == []  # not one byte of the day's file: O(1) whatever L1 holds
    assert not store.emit(mine)  # a second append of the same record is still deduplicated
    assert not store.emit(record(7))  # and a record not minted here is checked as before
    assert len(store.traces()) == 2_001


WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from deeptutor_jupyter.memory import MemoryStore, TraceRecord
    home, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    store = MemoryStore(home)
    for i in range(count):
        for trace_id in (f"{name}_{i}", f"shared_{i}"):
            store.emit(TraceRecord(trace_id=trace_id, session_id=name, turn_id=str(i),
                model="m", started_at=1.76e9 + i, finished_at=1.76e9 + i, question="q",
                answer_summary="a" * 300))
    """
)


def test_appends_from_several_processes_are_whole_and_deduplicated(tmp_path: Path) -> None:
    count, names = 60, ("a", "b", "c", "d")
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path), name, str(count)],
            cwd=REPO,
            stderr=subprocess.PIPE,
        )
        for name in names
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err.decode()
    lines = [
        json.loads(line)  # every line is whole JSON: no interleaving inside a line
        for path in (tmp_path / "memory" / "trace").rglob("*.jsonl")
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    ids = [line["trace_id"] for line in lines]
    expected = {f"{n}_{i}" for n in names for i in range(count)} | {
        f"shared_{i}" for i in range(count)
    }
    assert sorted(ids) == sorted(expected)  # each shared id once, though four processes sent it


def _profile(entries: int) -> str:
    section = Section("Profile", [Entry(f"e{i}", f"fact {i}", [f"t_{i}"]) for i in range(entries)])
    return render(Document([section]))


def test_l3_is_parsed_once_per_version_of_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore(tmp_path)
    store.overwrite("L3", "profile", _profile(50))
    parsed: list[int] = []
    real = store_module.parse
    monkeypatch.setattr(
        store_module, "parse", lambda text, **kw: parsed.append(1) or real(text, **kw)
    )
    first = store.system_prompt_block()
    for _ in range(5):
        assert store.system_prompt_block() == first
        store.read_l3_concat()
    assert len(parsed) == 4  # each L3 document once, though read twelve times
    copy = store.read("L3", "profile")
    copy.sections[0].entries.clear()  # a caller's copy: the cache is not touched
    assert len(store.read("L3", "profile").entries()) == 50
    other = MemoryStore(tmp_path)  # another kernel rewrites the file
    other.overwrite("L3", "profile", _profile(3))
    assert len(store.read("L3", "profile").entries()) == 3
    assert store.system_prompt_block() != first and "fact 2" in store.system_prompt_block()


def test_merge_of_thousands_of_entries_is_exact(tmp_path: Path) -> None:
    n, dups = 3000, 300
    entries = [Entry(f"e{i}", f"Fact {i % (n - dups)}.", [f"t_{i}"]) for i in range(n)]
    store = MemoryStore(tmp_path)
    store.overwrite("L3", "profile", render(Document([Section("Profile", entries)])))
    result = asyncio.run(consolidate(store, None, layer="L3", key="profile", mode="merge"))
    after = store.read("L3", "profile").entries()
    assert len(after) == n - dups
    assert [e.id for _, e in after] == [f"e{i}" for i in range(n - dups)]
    assert after[5][1].refs == ["t_5", f"t_{5 + n - dups}"] and after[-1][1].refs == [
        f"t_{n - dups - 1}"
    ]
    deleted = [op for op in result.ops_applied if op["op"] == "delete"]
    assert len(deleted) == dups and not result.rejected
    log = (tmp_path / "memory" / "deletions.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(log) == dups
