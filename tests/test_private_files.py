"""The learner's home is private: 0700, every file 0600, a looser home tightened with a notice.

Also the shared file primitives (deeptutor_jupyter/_files.py) and how a store that cannot be
written is reported: in words, as a StoreError, never as a raw sqlite3 or OS error.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from deeptutor_jupyter import _files
from deeptutor_jupyter.store.db import Store, StoreError


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def loose_umask() -> Iterator[None]:
    # The usual desktop umask: without the fix every file here would be 0644 and the home 0755.
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_a_new_home_is_0700_and_the_database_files_0600(tmp_path: Path):
    home = tmp_path / "home"
    store = Store(home / "state.db")
    try:
        store.ensure_session("s1", "nb.ipynb")  # a write, so the -wal and -shm exist
        assert mode(home) == 0o700
        for name in ("state.db", "state.db-wal", "state.db-shm"):
            assert (home / name).exists(), name
            assert mode(home / name) == 0o600, name
        assert store.notice is None
    finally:
        store.close()


def test_an_existing_looser_home_is_tightened_with_a_one_line_notice(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    db = home / "state.db"
    sqlite3.connect(db).close()
    os.chmod(db, 0o644)
    old_index = home / "kb" / "course" / "index" / "vocab.json"
    old_index.parent.mkdir(parents=True)
    old_index.write_text("{}")  # written 0644 by an older version
    theirs = home / "notes.txt"  # not the tutor's: left as it is
    theirs.write_text("mine")
    os.chmod(theirs, 0o644)
    store = Store(db)
    try:
        assert mode(home) == 0o700
        assert mode(db) == 0o600 and mode(old_index) == 0o600
        assert mode(theirs) == 0o644
        assert store.notice is not None and "\n" not in store.notice
        assert str(home) in store.notice and "private" in store.notice
    finally:
        store.close()
    again = Store(db)
    try:
        assert again.notice is None  # said once: the home is private now
    finally:
        again.close()


def test_a_full_disk_is_a_store_error_in_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def full(*args: object, **kwargs: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_files.os, "open", full)
    with pytest.raises(StoreError, match=r"disk holding .* is full; free some space"):
        Store(tmp_path / "home" / "state.db")


def test_a_full_disk_while_writing_is_a_store_error_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    store = Store(tmp_path / "state.db")

    class FullConnection:
        in_transaction = False

        def execute(self, sql: str, *args: object) -> None:
            raise sqlite3.OperationalError("database or disk is full")

        def close(self) -> None:
            pass

    real = store._conn
    monkeypatch.setattr(store, "_conn", FullConnection())
    with pytest.raises(StoreError, match="is full; free some space and run the cell again"):
        store.ensure_session("s1", "nb")
    real.close()


def test_a_home_that_cannot_be_created_is_a_store_error(tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError, match="a-file"):
        Store(blocker / "home" / "state.db")


def test_memory_export_and_documents_are_0600(tmp_path: Path):
    from deeptutor_jupyter.memory import MemoryStore

    memory = MemoryStore(tmp_path / "home")
    memory.overwrite("L3", "profile", "# Profile\n\n## Notes\n\n- likes proofs\n")
    out = memory.export_zip(tmp_path / "export.zip")
    assert mode(out) == 0o600
    for path in (tmp_path / "home").rglob("*"):
        if path.is_file():
            assert mode(path) == 0o600, path


def test_knowledge_base_files_are_0600(tmp_path: Path):
    from deeptutor_jupyter.knowledge.base import KnowledgeBase

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# Eigenvectors\n\nAn eigenvector keeps its direction.\n")
    kb = KnowledgeBase(tmp_path / "home", "course")
    kb.add_sources([notes])
    files = [p for p in (tmp_path / "home").rglob("*") if p.is_file()]
    assert any(p.parent.name == "index" for p in files)  # the bm25s index was written
    for path in files:
        assert mode(path) == 0o600, path


def test_settings_file_goes_through_the_shared_atomic_write(tmp_path: Path):
    from deeptutor_jupyter.config import write_settings

    home = tmp_path / "home"
    path = write_settings({"model": "m"}, home=home)
    assert mode(path) == 0o600 and mode(home) == 0o700
    assert [p.name for p in home.iterdir()] == ["settings.toml"]  # no temporary left behind


def test_atomic_write_replaces_and_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(_files.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    target = tmp_path / "doc.md"
    target.write_text("old")
    _files.atomic_write_text(target, "new")
    assert target.read_text() == "new" and mode(target) == 0o600
    assert len(synced) == 2  # the file, then the folder that holds the rename


def test_the_lock_excludes_a_second_holder(tmp_path: Path):
    lock = tmp_path / "x.lock"
    with _files.locked(lock), pytest.raises(BlockingIOError), _files.locked(lock, blocking=False):
        pass
    with _files.locked(lock, blocking=False):
        pass  # free again


def test_memory_files_module_imports_no_fcntl_at_load():
    code = (
        "import sys; import deeptutor_jupyter.memory._files, deeptutor_jupyter.knowledge.storage;"
        " print('fcntl' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
