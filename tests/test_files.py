"""Every rename in the package goes through ``deeptutor_jupyter._files``: a file's new bytes through
``atomic_write_bytes`` (temporary sibling, fsync, rename, fsync the folder), a finished file or
folder through ``move``. A hand-made temp-and-rename elsewhere is how a write that is not crash-safe
(no fsync, the wrong mode, a leftover temporary) gets in, so the package is scanned for one."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

from deeptutor_jupyter import _files

PACKAGE = Path(__file__).resolve().parents[1] / "deeptutor_jupyter"
RENAMERS = {
    "os": {"replace", "rename", "renames"},
    "shutil": {"move"},
    "tempfile": {"mkstemp", "NamedTemporaryFile"},
}


def renames_in(source: str) -> list[str]:
    """The calls in ``source`` that rename a file or make a temporary one to rename later."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in RENAMERS:
            found += [
                f"from {node.module} import {a.name}"
                for a in node.names
                if a.name in RENAMERS[node.module]
            ]
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name, owner = node.func.attr, ast.unparse(node.func.value)
        # Path.rename(target) and Path.replace(target): one argument (str.replace takes two,
        # as does a session's rename of a conversation).
        by_path = name in ("rename", "replace") and len(node.args) == 1 and not node.keywords
        if name in RENAMERS.get(owner, ()) or by_path:
            found.append(ast.unparse(node))
    return found


def test_the_scan_sees_every_way_to_rename() -> None:
    assert renames_in("import os\nos.replace(tmp, path)") == ["os.replace(tmp, path)"]
    assert renames_in("os.rename(a, b)\nshutil.move(a, b)") == [
        "os.rename(a, b)",
        "shutil.move(a, b)",
    ]
    assert renames_in("tmp.replace(path)\np.rename(q)") == ["tmp.replace(path)", "p.rename(q)"]
    assert renames_in("from os import replace") == ["from os import replace"]
    assert renames_in("fd, name = tempfile.mkstemp()") == ["tempfile.mkstemp()"]
    # Not renames: text replacement, a dataclass or datetime copy, a store's method.
    assert renames_in("s.replace('a', 'b')\nd.replace(year=1)\nstore.rename_session(s, t)") == []
    assert renames_in("session.rename(conversation, title)") == []


def test_only_the_files_module_renames() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}: {call}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "_files.py"
        for call in renames_in(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
    assert renames_in((PACKAGE / "_files.py").read_text(encoding="utf-8")) == [
        "os.replace(source, target)"
    ]


def test_move_replaces_a_file_and_a_folder(tmp_path: Path) -> None:
    (tmp_path / "new").write_text("new")
    (tmp_path / "old").write_text("old")
    _files.move(tmp_path / "new", tmp_path / "old")
    assert (tmp_path / "old").read_text() == "new" and not (tmp_path / "new").exists()
    (tmp_path / "staged").mkdir()
    (tmp_path / "staged" / "a.txt").write_text("a")
    _files.move(tmp_path / "staged", tmp_path / "v2", durable=False)
    assert (tmp_path / "v2" / "a.txt").read_text() == "a" and not (tmp_path / "staged").exists()


def test_an_atomic_write_keeps_its_mode_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "pack.json"
    target.write_text("old")
    _files.atomic_write_text(target, "new", mode=0o444)
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o444
    assert os.listdir(tmp_path) == ["pack.json"]
