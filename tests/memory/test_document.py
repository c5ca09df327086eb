"""The footnoted Markdown format: round trips, numbering, sharing, legacy migration."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deeptutor_jupyter.memory.document import (
    Document,
    DocumentError,
    Entry,
    Section,
    line_view,
    normalise,
    parse,
    render,
    text_problem,
)

# Line and paragraph separators are what str.splitlines splits on; entries are single lines.
_CHARS = st.characters(exclude_categories=("Cs", "Cc", "Zl", "Zp"))
texts = (
    st.text(_CHARS, min_size=1, max_size=240)
    .map(str.strip)
    .filter(lambda t: text_problem(t) is None)
)
refs = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.:-]{0,20}\Z")
ids = st.from_regex(r"\A[A-Za-z0-9_-]{1,12}\Z")
names = st.text(_CHARS, min_size=1, max_size=30).map(str.strip).filter(bool)


@st.composite
def documents(draw: st.DrawFn) -> Document:
    section_names = draw(st.lists(names, max_size=4, unique=True))
    id_pool = iter(draw(st.lists(ids, min_size=20, max_size=20, unique=True)))
    ref_pool = draw(st.lists(refs, min_size=1, max_size=6, unique=True))
    sections = []
    for name in section_names:
        entries = []
        for _ in range(draw(st.integers(0, 4))):
            chosen = draw(st.lists(st.sampled_from(ref_pool), max_size=3, unique=True))
            entries.append(Entry(next(id_pool), draw(texts), chosen))
        sections.append(Section(name, entries))
    return Document(sections)


@given(documents())
def test_parse_render_round_trip(doc: Document) -> None:
    text = render(doc)
    again = parse(text, strict=True)
    assert again == doc
    assert render(again) == text


@given(texts)
def test_any_valid_text_survives_a_bullet(text: str) -> None:
    doc = Document([Section("s", [Entry("x", text, ["t_1"])])])
    assert parse(render(doc), strict=True) == doc


def test_labels_numbered_by_first_appearance_and_shared() -> None:
    doc = Document(
        [
            Section("Level", [Entry("a", "Knows fractions", ["t_9", "t_2"])]),
            Section("Habits", [Entry("b", "Works late", ["t_2"]), Entry("c", "Asks why", ["t_5"])]),
        ]
    )
    assert render(doc) == (
        "## Level\n"
        "- Knows fractions [^1][^2] <!--m_a-->\n"
        "\n"
        "## Habits\n"
        "- Works late [^2] <!--m_b-->\n"
        "- Asks why [^3] <!--m_c-->\n"
        "\n"
        "---\n"
        "\n"
        "[^1]: t_9\n"
        "[^2]: t_2\n"
        "[^3]: t_5\n"
    )


def test_duplicate_labels_for_one_ref_collapse_on_render() -> None:
    text = "## S\n- one [^1] <!--m_a-->\n- two [^3] <!--m_b-->\n\n[^1]: t_1\n[^3]: t_1\n"
    assert render(parse(text)) == (
        "## S\n- one [^1] <!--m_a-->\n- two [^1] <!--m_b-->\n\n---\n\n[^1]: t_1\n"
    )


def test_legacy_footnotes_are_read_and_migrated() -> None:
    legacy = (
        "# Profile\n\n## Level\n- Beginner [^m_abc]\n- Likes proofs [^m_def]\n\n"
        "[^m_abc]: chat:t1, notebook:t2\n[^m_def]: notebook:t2\n"
    )
    doc = parse(legacy, strict=True)
    assert doc.title == "Profile"
    assert [(e.id, e.refs) for _, e in doc.entries()] == [
        ("abc", ["chat:t1", "notebook:t2"]),
        ("def", ["notebook:t2"]),
    ]
    assert render(doc) == (
        "# Profile\n\n## Level\n- Beginner [^1][^2] <!--m_abc-->\n"
        "- Likes proofs [^2] <!--m_def-->\n\n---\n\n[^1]: chat:t1\n[^2]: notebook:t2\n"
    )


def test_hand_added_bullet_gets_a_stable_id() -> None:
    text = "## Goals\n- Pass the exam in June\n"
    first, second = parse(text), parse(text)
    assert first == second
    assert first.sections[0].entries[0].id.startswith("h")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("- orphan bullet\n", "before the first"),
        ("## S\nplain prose\n", "not a section, bullet or footnote"),
        ("## S\n- a [^7] <!--m_a-->\n", "[^7] has no definition"),
        ("## S\n- a <!--m_a-->\n- b <!--m_a-->\n", "used twice"),
        ("## S\n- a [^1] <!--m_a-->\n\n[^1]: not a ref\n", "is not a trace id"),
    ],
)
def test_strict_parse_explains(text: str, problem: str) -> None:
    with pytest.raises(DocumentError) as caught:
        parse(text, strict=True)
    assert problem in str(caught.value)


def test_lenient_parse_keeps_stray_text() -> None:
    doc = parse("## S\nplain prose\n")
    assert [e.text for _, e in doc.entries()] == ["plain prose"]


@pytest.mark.parametrize(
    "variant",
    [
        "Prefers short answers",
        "prefers  short answers.",
        "PREFERS short, answers!",
        " Prefers short answers ",
    ],
)
def test_normalise(variant: str) -> None:
    assert normalise(variant) == "prefers short answers"


def test_line_view_has_ids_and_refs_without_footnotes() -> None:
    doc = Document([Section("S", [Entry("a", "One", ["t_1"])])])
    assert line_view(doc) == "1. [m_a] (S) One  refs: t_1"
    assert line_view(Document()) == "(the document is empty)"
