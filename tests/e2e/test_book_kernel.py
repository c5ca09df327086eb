"""``%tutor book`` in a real kernel: progress in the cell, Stop, and the same line resuming the
build; the notebook is written next to this one and the output ends as static Markdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deeptutor_jupyter.knowledge import KnowledgeBase
from deeptutor_jupyter.learning.sandbox import isolation_available
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.book.test_book import NOT_REPAIRED, OUTLINE, REPAIRED, VECTORS, matrices
from tests.e2e.kernel_driver import KernelDriver, shown_text

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not isolation_available(), reason="the book's examples need the sandbox"),
]


def final_markdown(k: KernelDriver, text: str) -> str:
    return str(
        k.wait_for(
            lambda: next(
                (
                    shown_text(m["content"]["data"])
                    for m in k.iopub
                    if m["header"]["msg_type"] == "update_display_data"
                    and text in shown_text(m["content"]["data"])
                ),
                None,
            ),
            timeout=40,
        )
    )


def test_a_book_is_stopped_from_its_cell_and_resumed_by_the_same_line(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    folder = tmp_path / "course"
    folder.mkdir()
    (folder / "vectors.md").write_text("# Vectors\n\nA vector has a direction. The dot product.\n")
    (folder / "matrices.md").write_text("# Matrices\n\nA matrix has an identity.\n")
    KnowledgeBase(tmp_path / "home", "course").add_sources([folder])
    fake_llm.extend([OUTLINE, VECTORS, Reply(text=matrices().text, delay=30)])
    kernel.execute("%tutor book Linear algebra --kb course")
    stop = kernel.wait_for(
        lambda: kernel.with_class("dt-book") and kernel.children(kernel.with_class("dt-book")[0])[1]
    )
    kernel.wait_for(lambda: len(fake_llm.requests) == 3)  # writing chapter 2
    kernel.click(stop)
    assert "run the same line again to resume" in final_markdown(kernel, "Stopped building")
    fake_llm.extend([matrices(), REPAIRED, NOT_REPAIRED])
    kernel.execute("%tutor book Linear algebra --kb course")
    done = final_markdown(kernel, "Study notebook")
    assert "Study notebook: linear-algebra.ipynb." in done and "Written: Matrices." in done
    assert len(fake_llm.requests) == 6  # the outline and chapter 1 were not asked for again
    cells = json.loads((tmp_path / "linear-algebra.ipynb").read_text())["cells"]
    assert sum("exercise" in c["metadata"].get("tags", []) for c in cells) == 2
