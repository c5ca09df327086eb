from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from deeptutor_jupyter.agent.text_tools import (
    TextToolCallFilter,
    extract_text_tool_calls,
    text_tool_instructions,
)

DSML = (
    "Let me check.\n"
    "<｜｜DSML｜｜tool_calls>\n"
    '  <｜｜DSML｜｜invoke name="calculate">\n'
    '    <｜｜DSML｜｜parameter name="expression" string="true">2+2</｜｜DSML｜｜parameter>\n'
    "  </｜｜DSML｜｜invoke>\n"
    "</｜｜DSML｜｜tool_calls>"
)


def stream(chunks: list[str]) -> str:
    text_filter = TextToolCallFilter()
    return "".join(text_filter.feed(chunk) for chunk in chunks) + text_filter.flush()


def test_dsml_block_is_extracted_and_hidden() -> None:
    calls, visible = extract_text_tool_calls(DSML)
    assert visible == "Let me check.\n"
    assert [(call.name, json.loads(call.arguments)) for call in calls] == [
        ("calculate", {"expression": "2+2"})
    ]
    assert calls[0].id.startswith("call_text_")


def test_dsml_matches_structure_not_token_bytes() -> None:
    text = (
        "<|DSML|function_calls>"
        '<|DSML|invoke name="a"><|DSML|parameter name="x">1</|DSML|parameter></|DSML|invoke>'
        '<|DSML|invoke name="b"><|DSML|parameter name="y">[1, 2]</|DSML|parameter></|DSML|invoke>'
        "</|DSML|function_calls>after"
    )
    calls, visible = extract_text_tool_calls(text)
    assert visible == "after"
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("a", {"x": 1}),
        ("b", {"y": [1, 2]}),
    ]


def test_dsml_parameter_types() -> None:
    text = (
        '<｜DSML｜invoke name="t">'
        '<｜DSML｜parameter name="s" string="true">42</｜DSML｜parameter>'
        '<｜DSML｜parameter name="n" string="false">42</｜DSML｜parameter>'
        '<｜DSML｜parameter name="o">{"k": true}</｜DSML｜parameter>'
        '<｜DSML｜parameter name="w">not json</｜DSML｜parameter>'
        "</｜DSML｜invoke>"
    )
    calls, visible = extract_text_tool_calls(text)
    assert visible == ""
    assert json.loads(calls[0].arguments) == {"s": "42", "n": 42, "o": {"k": True}, "w": "not json"}


def test_bare_invoke_without_wrapper() -> None:
    calls, visible = extract_text_tool_calls(
        'A<invoke name="calc"><parameter name="e" string="true">1+1</parameter></invoke>B'
    )
    assert visible == "AB"
    assert (calls[0].name, json.loads(calls[0].arguments)) == ("calc", {"e": "1+1"})


def test_tool_call_json_block() -> None:
    text = 'Sure.<tool_call>{"name": "calculate", "arguments": {"expression": "3*3"}}</tool_call>'
    calls, visible = extract_text_tool_calls(text)
    assert visible == "Sure."
    assert calls[0].name == "calculate"
    assert json.loads(calls[0].arguments) == {"expression": "3*3"}


def test_tool_call_parameters_and_string_arguments() -> None:
    text = (
        '<tool_call>{"name": "a", "parameters": {"x": 1}}</tool_call>'
        '<tool_call>{"name": "b", "arguments": "{\\"y\\": 2}"}</tool_call>'
        '<tool_call>{"name": "c"}</tool_call>'
    )
    calls, _ = extract_text_tool_calls(text)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("a", {"x": 1}),
        ("b", {"y": 2}),
        ("c", {}),
    ]


def test_several_blocks_get_distinct_ids() -> None:
    block = '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
    calls, visible = extract_text_tool_calls(f"1{block}2{block}3")
    assert visible == "123"
    assert len({call.id for call in calls}) == 2


def test_malformed_json_is_hidden_and_kept_raw() -> None:
    inner = '{"name": "calculate", "arguments": {"expression": "2+2"}'
    calls, visible = extract_text_tool_calls(f"before <tool_call>{inner}</tool_call> after")
    assert visible == "before  after"
    assert calls[0].name == "calculate"
    assert calls[0].arguments == inner


def test_malformed_without_a_name() -> None:
    calls, visible = extract_text_tool_calls("<tool_call>just words</tool_call>")
    assert visible == ""
    assert (calls[0].name, calls[0].arguments) == ("", "just words")


def test_unclosed_block_at_end_is_a_call() -> None:
    calls, visible = extract_text_tool_calls('ok <tool_call>{"name": "a", "arguments": {"v": 1}}')
    assert visible == "ok "
    assert json.loads(calls[0].arguments) == {"v": 1}


def test_text_without_markup_is_untouched() -> None:
    text = "If a < b and b > c, then <b>bold</b> x<y and 2<3."
    assert extract_text_tool_calls(text) == ([], text)


def test_streaming_hides_markup_split_across_chunks() -> None:
    text_filter = TextToolCallFilter()
    assert text_filter.feed("Hi <tool_") == "Hi "
    assert text_filter.feed('call>{"name": "a", "argu') == ""
    assert text_filter.feed('ments": {}}</tool_call> done') == " done"
    assert text_filter.flush() == ""
    assert [call.name for call in text_filter.calls] == ["a"]


def test_streaming_releases_ordinary_angle_brackets_promptly() -> None:
    text_filter = TextToolCallFilter()
    assert text_filter.feed("x<y") == "x<y"
    assert text_filter.feed(" and a <") == " and a "
    assert text_filter.feed("= b") == "<= b"
    assert text_filter.feed(" <i") == " "
    assert text_filter.feed("talic>") == "<italic>"


def test_streaming_holds_dsml_prefix() -> None:
    text_filter = TextToolCallFilter()
    assert text_filter.feed("Answer: <｜｜DSML｜｜inv") == "Answer: "
    assert text_filter.feed('oke name="calculate">') == ""
    assert text_filter.flush() == ""
    assert [call.name for call in text_filter.calls] == ["calculate"]


def test_instructions_list_tools_and_format() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "calculate",
                "description": "Evaluate arithmetic.",
                "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
            },
        }
    ]
    text = text_tool_instructions(tools)
    assert "- calculate: Evaluate arithmetic." in text
    assert '{"type":"object","properties":{"expression":{"type":"string"}}}' in text
    assert '<tool_call>{"name": "<tool name>", "arguments": {' in text
    assert "stop and wait" in text


_PIECES = st.sampled_from(
    [
        "<tool_call>",
        "</tool_call>",
        '{"name": "a", "arguments": {}}',
        "<｜｜DSML｜｜tool_calls>",
        "</｜｜DSML｜｜tool_calls>",
        '<｜DSML｜invoke name="x">',
        "</｜DSML｜invoke>",
        '<｜DSML｜parameter name="p" string="true">',
        "</｜DSML｜parameter>",
        "<invoke",
        ' name="y"',
        "<",
        ">",
        "/",
        " ",
        "a",
        "x<y",
        "tool_call",
        "｜",
        '"',
        "\n",
    ]
)
_TEXT = st.lists(_PIECES, max_size=25).map("".join)


@given(text=_TEXT, cuts=st.lists(st.integers(min_value=0, max_value=1000), max_size=8))
def test_any_chunking_gives_the_extracted_visible_text(text: str, cuts: list[int]) -> None:
    points = sorted({cut % (len(text) + 1) for cut in cuts})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    assert stream(chunks) == extract_text_tool_calls(text)[1]


@given(text=_TEXT)
def test_char_by_char_gives_the_same_calls(text: str) -> None:
    text_filter = TextToolCallFilter()
    for char in text:
        text_filter.feed(char)
    text_filter.flush()
    whole, _ = extract_text_tool_calls(text)
    assert [(c.name, c.arguments) for c in text_filter.calls] == [
        (c.name, c.arguments) for c in whole
    ]
