from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from deeptutor_jupyter.agent.think import Piece, ThinkTagFilter, split_thinking


def run(chunks: list[str]) -> list[Piece]:
    think_filter = ThinkTagFilter()
    pieces: list[Piece] = []
    for chunk in chunks:
        pieces += think_filter.feed(chunk)
    pieces += think_filter.flush()
    return merge(pieces)


def merge(pieces: list[Piece]) -> list[Piece]:
    merged: list[Piece] = []
    for kind, text in pieces:
        assert text, "empty pieces are never emitted"
        if merged and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + text)
        else:
            merged.append((kind, text))
    return merged


def test_plain_text_passes_through() -> None:
    assert run(["Hello ", "world"]) == [("content", "Hello world")]


def test_think_block_becomes_thinking() -> None:
    assert run(["<think>plan it</think>The answer is 4."]) == [
        ("thinking", "plan it"),
        ("content", "The answer is 4."),
    ]


def test_thinking_tag_and_case_insensitive() -> None:
    assert run(["A<THINKING>hm</Thinking>B"]) == [
        ("content", "A"),
        ("thinking", "hm"),
        ("content", "B"),
    ]


def test_blocks_anywhere_in_content() -> None:
    assert run(["x<think>1</think>y<think>2</think>z"]) == [
        ("content", "x"),
        ("thinking", "1"),
        ("content", "y"),
        ("thinking", "2"),
        ("content", "z"),
    ]


def test_tag_split_across_chunks() -> None:
    think_filter = ThinkTagFilter()
    assert think_filter.feed("Hi <thi") == [("content", "Hi ")]
    assert think_filter.feed("nk>reason</thi") == [("thinking", "reason")]
    assert think_filter.feed("nk>done") == [("content", "done")]
    assert think_filter.flush() == []


def test_less_than_streams_once_it_cannot_be_a_tag() -> None:
    think_filter = ThinkTagFilter()
    assert think_filter.feed("a <") == [("content", "a ")]
    assert think_filter.feed(" b") == [("content", "< b")]
    assert think_filter.feed(" and x<y") == [("content", " and x<y")]


def test_only_the_possible_tag_prefix_is_held() -> None:
    think_filter = ThinkTagFilter()
    assert think_filter.feed("if a<b then <thin") == [("content", "if a<b then ")]
    assert think_filter.flush() == [("content", "<thin")]


def test_unclosed_block_at_flush_is_thinking() -> None:
    think_filter = ThinkTagFilter()
    assert think_filter.feed("<think>still going") == [("thinking", "still going")]
    assert think_filter.feed(" </thin") == [("thinking", " ")]
    assert think_filter.flush() == [("thinking", "</thin")]


def test_flush_resets_the_filter() -> None:
    think_filter = ThinkTagFilter()
    think_filter.feed("<think>x")
    think_filter.flush()
    assert think_filter.feed("visible") == [("content", "visible")]


def test_stray_closing_tag_outside_block_is_dropped() -> None:
    assert run(["answer</think> more"]) == [("content", "answer more")]


def test_open_tag_inside_block_is_thinking_text() -> None:
    assert run(["<think>a <think> b</think>c"]) == [("thinking", "a <think> b"), ("content", "c")]


def test_split_thinking_on_a_whole_message() -> None:
    assert split_thinking("<think>why</think>\nbecause") == ("\nbecause", "why")


_ALPHABET = st.sampled_from(["<", ">", "/", "t", "h", "i", "n", "k", "g", "T", "K", " ", "a"])
_TAGS = st.sampled_from(["<think>", "</think>", "<thinking>", "</THINKING>", "<thi", "</"])
_TEXT = st.lists(st.one_of(_ALPHABET, _TAGS), max_size=30).map("".join)


@given(text=_TEXT, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_any_chunking_gives_the_same_output(text: str, cuts: list[int]) -> None:
    points = sorted({cut % (len(text) + 1) for cut in cuts})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    assert run(chunks) == run([text])


@given(text=_TEXT)
def test_char_by_char_streaming_matches_whole(text: str) -> None:
    assert run(list(text)) == run([text])


@given(text=st.text(alphabet=st.characters(exclude_characters="<"), max_size=50))
def test_text_without_angle_bracket_is_never_held(text: str) -> None:
    think_filter = ThinkTagFilter()
    out = think_filter.feed(text)
    assert "".join(part for _, part in out) == text
