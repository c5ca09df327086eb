"""The sources under an answer: cited passages only, [n] markers that link, passages told apart."""

from __future__ import annotations

from pathlib import Path

from deeptutor_jupyter.kernel.turn_plan import cited_numbers, source_links, sources_markdown
from deeptutor_jupyter.kernel.widgets.turn_view import TurnView


def hit(n: int, cell: int | None, title: str, chunk: str, file: str = "week1.ipynb") -> dict:
    return {
        "n": n,
        "chunk_id": chunk,
        "file": file,
        "path": f"/course/{file}",
        "cell": cell,
        "page": None,
        "title": title,
        "link": f"lab/tree/course/{file}" + (f"#cell-id=c{cell}" if cell is not None else ""),
    }


HITS = [
    hit(1, 1, "Eigenvalues", "a"),
    hit(2, 4, "Eigenvectors", "b"),
    hit(1, 1, "Eigenvalues", "a"),  # the same passage from a second search
    hit(3, None, "Intro", "c", file="notes.md"),
    hit(4, None, "Intro", "d", file="notes.md"),
]


def test_two_passages_of_one_file_are_told_apart():
    links = source_links(HITS, Path("/course"))
    assert [label for label, _ in links] == [
        "week1.ipynb, cell 2 · Eigenvalues",
        "week1.ipynb, cell 5 · Eigenvectors",
        "notes.md · Intro (passage 3)",
        "notes.md · Intro (passage 4)",
    ]
    assert links[0][1] == "week1.ipynb#cell-id=c1"


def test_only_the_cited_passages_are_listed_and_markers_link():
    links = source_links(HITS, Path("/course"))
    answer = "An eigenvalue scales [1]; see also [3]. A [link](x) and a[4](y) are not citations."
    assert cited_numbers(answer) == {1, 3}
    md = sources_markdown(links, answer=answer)
    assert md.startswith("**Sources**\n\n- **[1]** [week1.ipynb, cell 2 · Eigenvalues]")
    assert "[3]" in md and "Eigenvectors" not in md and "passage 4" not in md
    # Reference definitions: in one Markdown document, each [n] of the answer is a link.
    assert md.endswith("[1]: <week1.ipynb#cell-id=c1>\n[3]: <notes.md>")


def test_an_answer_citing_nothing_says_so_and_keeps_the_list():
    links = source_links(HITS, Path("/course"))
    md = sources_markdown(links, answer="No citations here.")
    assert md.startswith("**Passages the tutor read** (none cited)") and md.count("- **[") == 4
    assert sources_markdown([], answer="x") == ""


def test_the_live_answer_gets_the_link_definitions():
    view = TurnView(model_label="m", on_stop=lambda: None, make_card=lambda body: None)
    view._current_text().parts.append("Eigenvalues scale vectors [1].")
    view.show_sources(sources_markdown(source_links(HITS[:1], Path("/course"))))
    # The front end puts them under each block that cites (labextension/src/answerblocks.ts).
    answer = view._text_blocks[0].widget
    assert answer.get_state()["text"] == "Eigenvalues scale vectors [1]."
    assert answer.suffix == "\n\n[1]: <week1.ipynb#cell-id=c1>"
