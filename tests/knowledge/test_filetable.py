"""The manifest's file table by column: rows found, taken and set; other shapes refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.knowledge import KnowledgeBase
from deeptutor_jupyter.knowledge.filetable import COLUMNS, FileTable, TableError


def _entry(i: int) -> dict[str, Any]:
    return {
        "size": 10 + i,
        "mtime_ns": 1_000 + i,
        "sha256": f"{i:064x}",
        "chunks": i % 3,
        "row": 3 * i,
        "offset": 100 * i,
        "length": 100,
        "digest": f"{i + 7:064x}",
    }


def _table(n: int) -> FileTable:
    table = FileTable()
    for i in range(n):
        table.append(f"f{i}.md", _entry(i))
    return table


def test_rows_are_found_taken_and_round_trip_through_json() -> None:
    table = _table(5)
    assert len(table) == 5 and table.where("f3.md") == 3 and table.where("nope.md") is None
    assert table.entry(2) == _entry(2)
    taken = table.take([4, 0, 2])
    assert taken.path == ["f4.md", "f0.md", "f2.md"] and taken.entry(0) == _entry(4)
    assert table.take([1]).path == ["f1.md"] and len(table.take([])) == 0
    again = FileTable.from_json(json.loads(json.dumps(table.to_json())))
    assert again.to_json() == table.to_json()
    copy = table.copy()
    copy.set(0, _entry(9))
    assert table.entry(0) == _entry(0) and copy.entry(0) == _entry(9)  # independent columns


@pytest.mark.parametrize(
    "data",
    [
        [],
        {name: [] for name in COLUMNS if name != "digest"},
        {**{name: [] for name in COLUMNS}, "extra": []},
        {**{name: [1] for name in COLUMNS}, "path": ["a.md"], "size": []},
        {**{name: [1] for name in COLUMNS}, "path": [1]},
        {**{name: [] for name in COLUMNS}, "row": {}},
    ],
    ids=["not-a-dict", "missing-column", "extra-column", "ragged", "path-not-text", "not-a-list"],
)
def test_another_shape_is_refused(data: Any) -> None:
    with pytest.raises(TableError):
        FileTable.from_json(data)


def test_a_damaged_table_in_the_manifest_rebuilds_the_index(tmp_path: Path) -> None:
    course = tmp_path / "course"
    course.mkdir()
    for i in range(4):
        (course / f"n{i}.md").write_text(f"# Note {i}\n\neigenvalues {i}\n", encoding="utf-8")
    kb = KnowledgeBase(tmp_path / "home", "t", root=tmp_path)
    kb.add_sources([course])
    manifest = json.loads((kb.folder / "manifest.json").read_bytes())
    (piece,) = (kb.folder / "tables" / name for name, _, _ in manifest["shards"].values())
    table = json.loads(piece.read_bytes())
    table["row"] = ["zero", 1, 2, 3]  # a hand edit
    piece.write_text(json.dumps(table), encoding="utf-8")
    assert kb.verify() is not None
    report = kb.refresh()
    assert report.rebuilt_from_corruption and report.added == 4
    assert kb.verify() is None and kb.search("eigenvalues")
