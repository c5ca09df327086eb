"""TUTOR.md is read bounded and only as a regular file (issue 23, item 9): a 1 GiB TUTOR.md was
read whole on every turn to keep 6,000 characters. Every reader (the folder's instructions, the
policy's front matter, a course pack's instructions) reads at most ``TUTOR_MD_BYTES``."""

from __future__ import annotations

import os
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from deeptutor_jupyter.kernel.notebook_context import tutor_md_blocks
from deeptutor_jupyter.learning.policy import decide, read_policy
from deeptutor_jupyter.limits import TUTOR_MD_BYTES
from deeptutor_jupyter.runtime.course import instruction_blocks
from deeptutor_jupyter.runtime.course_files import Pack

HEAD = "---\npolicy:\n  mode: hints\n  hints: 1\n---\n# Course\nAnswer in French. MARK-42\n"
BIG = 64 * 1024 * 1024  # sparse: costs no disk, but a whole read would allocate all of it


def huge_tutor_md(folder: Path, head: str = HEAD) -> Path:
    path = folder / "TUTOR.md"
    with path.open("wb") as fh:
        fh.write(head.encode("utf-8"))
        fh.truncate(BIG)
    return path


def peak_bytes(read: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_huge_tutor_md_is_read_only_as_far_as_it_is_kept(tmp_path: Path) -> None:
    path = huge_tutor_md(tmp_path)
    pack = Pack("algebra", 1, None, tmp_path, "prof")
    readers: list[Callable[[], object]] = [
        lambda: tutor_md_blocks(tmp_path),
        lambda: read_policy(path),
        lambda: instruction_blocks([pack]),
    ]
    for read in readers:
        read()  # first: imports and caches are not what is measured
        assert peak_bytes(read) < BIG // 16
    # what each keeps is still there: the instructions and the front matter's policy
    assert "MARK-42" in tutor_md_blocks(tmp_path)[-1]
    assert "MARK-42" in instruction_blocks([pack])[0]
    assert decide(read_policy(path)).mode == "hints"


def test_a_character_cut_at_the_limit_does_not_garble_the_text(tmp_path: Path) -> None:
    # "é" is two bytes in UTF-8; the limit falls inside one of them.
    text = "é" * (TUTOR_MD_BYTES // 2 + 10)
    (tmp_path / "TUTOR.md").write_text(text, encoding="utf-8")
    [_, block] = tutor_md_blocks(tmp_path)
    assert block.endswith("é" * 100) and "Ã" not in block


def test_a_tutor_md_that_is_a_link_or_a_fifo_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "private.md"
    secret.write_text("---\npolicy:\n  mode: 'off'\n---\nSECRET-NOTES\n")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "TUTOR.md").symlink_to(secret)
    assert tutor_md_blocks(linked) == []
    assert read_policy(linked / "TUTOR.md") is None
    fifo_dir = tmp_path / "fifo"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "TUTOR.md")
    done = threading.Event()

    def read() -> None:
        tutor_md_blocks(fifo_dir)
        read_policy(fifo_dir / "TUTOR.md")
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(5), "reading a FIFO named TUTOR.md hung"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig"])
def test_a_long_tutor_md_with_a_bom_still_decodes(tmp_path: Path, encoding: str) -> None:
    text = "Réponds en français. " * 5000  # longer than the limit in either encoding
    (tmp_path / "TUTOR.md").write_bytes(text.encode(encoding))
    [_, block] = tutor_md_blocks(tmp_path)
    assert "Réponds en français." in block
