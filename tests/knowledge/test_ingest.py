"""Each format becomes chunks that follow its structure and know their anchor."""

from __future__ import annotations

from pathlib import Path

import pytest

from deeptutor_jupyter.knowledge import IngestError, ingest_file
from deeptutor_jupyter.knowledge.ingest import MAX_CHUNK_CHARS, split_long
from tests.knowledge.helpers import write_notebook, write_pdf

MARKDOWN = """\
Preamble before any heading.

# Loops

## For loops

A for loop walks over a sequence.

```python
# a comment, not a heading
for item in items:
    print(item)
```

### Nested

Inner section.

## While loops

Repeat while a condition holds.
"""


def test_markdown_chunks_follow_headings(tmp_path: Path) -> None:
    path = tmp_path / "notes" / "loops.md"
    path.parent.mkdir()
    path.write_text(MARKDOWN, encoding="utf-8")
    chunks = ingest_file(path, tmp_path, "course")
    assert [c.title for c in chunks] == [
        "loops.md",
        "Loops > For loops",
        "Loops > For loops > Nested",
        "Loops > While loops",
    ]
    assert all(c.kind == "markdown" and c.path == "notes/loops.md" for c in chunks)
    assert [c.chunk_id for c in chunks] == [f"notes/loops.md#{n}" for n in range(4)]
    assert "# a comment, not a heading" in chunks[1].text
    lines = MARKDOWN.splitlines()
    for chunk in chunks:
        assert lines[chunk.line - 1] == chunk.text.splitlines()[0]  # type: ignore[operator]
    assert chunks[0].cell is None and chunks[0].page is None


def test_skipped_heading_levels_leave_no_gaps(tmp_path: Path) -> None:
    path = tmp_path / "a.markdown"
    path.write_text("# Top\n\n### Deep\n\nbody\n", encoding="utf-8")
    assert [c.title for c in ingest_file(path, tmp_path, "k")] == ["Top > Deep"]


def test_plain_text_and_long_sections_are_split_at_blank_lines(tmp_path: Path) -> None:
    paragraph = "word " * 100
    path = tmp_path / "long.txt"
    path.write_text("\n\n".join([paragraph] * 12), encoding="utf-8")
    chunks = ingest_file(path, tmp_path, "k")
    assert len(chunks) > 1
    assert all(len(c.text) <= MAX_CHUNK_CHARS and c.kind == "text" for c in chunks)
    assert chunks[0].line == 1 and chunks[1].line > 1  # type: ignore[operator]
    assert all(c.title == "long.txt" for c in chunks)


def test_split_long_cuts_a_single_huge_line() -> None:
    parts = split_long("x" * 4000, limit=1000)
    assert [len(p) for _, p in parts] == [1000, 1000, 1000, 1000]


def test_python_chunks_are_top_level_definitions(tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    path.write_text(
        '"""Module doc."""\nimport math\n\n\n@cache\ndef area(r):\n    return math.pi * r * r\n'
        "\n\nclass Circle:\n    def grow(self):\n        pass\n\n\nRADIUS = 2\n",
        encoding="utf-8",
    )
    chunks = ingest_file(path, tmp_path, "k")
    assert [(c.title, c.line) for c in chunks] == [
        ("mod.py", 1),
        ("mod.py > def area", 5),
        ("mod.py > class Circle", 10),
        ("mod.py", 15),
    ]
    assert chunks[1].text.startswith("@cache")
    assert all(c.kind == "python" for c in chunks)


def test_python_with_a_syntax_error_is_still_indexed_as_text(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("def f(:\n    pass\n", encoding="utf-8")
    (chunk,) = ingest_file(path, tmp_path, "k")
    assert chunk.kind == "python" and "def f(" in chunk.text


def test_notebook_chunks_know_their_cell(tmp_path: Path) -> None:
    path = write_notebook(
        tmp_path / "lesson.ipynb",
        [
            ("markdown", "# Lists\n\nA list holds items."),
            ("code", "xs = [1, 2, 3]"),
            ("code", ""),
            ("markdown", "## Slicing\n\nTake a part."),
            ("code", ["ys = xs[1:]\n", "print(ys)"]),
            ("raw", "ignored raw cell"),
        ],
    )
    chunks = ingest_file(path, tmp_path, "k")
    assert [(c.kind, c.cell, c.cell_id, c.title) for c in chunks] == [
        ("markdown", 0, "c0", "Lists"),
        ("code", 1, "c1", "Lists"),
        ("markdown", 3, "c3", "Lists > Slicing"),
        ("code", 4, "c4", "Lists > Slicing"),
    ]
    assert chunks[3].text == "ys = xs[1:]\nprint(ys)"
    assert all(c.line is None and c.page is None for c in chunks)


def test_notebook_without_cell_ids(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "old.ipynb", [("code", "x = 1")], ids=False)
    (chunk,) = ingest_file(path, tmp_path, "k")
    assert chunk.cell == 0 and chunk.cell_id is None


@pytest.mark.parametrize("body", ["{not json", '{"worksheets": []}', "[]"])
def test_bad_notebooks_raise_ingest_error(tmp_path: Path, body: str) -> None:
    path = tmp_path / "bad.ipynb"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(IngestError, match=r"bad\.ipynb"):
        ingest_file(path, tmp_path, "k")


def test_pdf_chunks_know_their_page(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "slides.pdf", ["Gradient descent basics", "Eigenvalues (page 2)"])
    chunks = ingest_file(path, tmp_path, "k")
    assert [(c.page, c.kind, c.title) for c in chunks] == [
        (1, "pdf", "slides.pdf p. 1"),
        (2, "pdf", "slides.pdf p. 2"),
    ]
    assert "Gradient descent" in chunks[0].text and "Eigenvalues" in chunks[1].text


def test_broken_pdf_raises_ingest_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4\nthis is not really a pdf")
    with pytest.raises(IngestError, match=r"broken\.pdf"):
        ingest_file(path, tmp_path, "k")


def test_unknown_suffix_gives_no_chunks(tmp_path: Path) -> None:
    path = tmp_path / "image.png"
    path.write_bytes(b"\x89PNG")
    assert ingest_file(path, tmp_path, "k") == []


def test_file_outside_root_keeps_an_absolute_path(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("hello", encoding="utf-8")
    (chunk,) = ingest_file(path, tmp_path / "elsewhere", "k")
    assert chunk.path == path.as_posix()
