"""Tool calls that an endpoint writes into the content channel instead of ``tool_calls``.

Two dialects are understood. DeepSeek deployments without function calling write DSML markup
(``<｜｜DSML｜｜invoke name="...">`` with ``parameter`` children); the special tokens vary between
versions, so only the stable ``invoke name=`` / ``parameter name=`` structure is matched. In text
tool-call mode we ask every model for ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

Unhandled, the markup would stream to the learner as the answer while no tool runs. So the
streaming filter hides it as it arrives, and the calls are recovered from the same scan.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from typing import Any

from deeptutor_jupyter.providers.base import ToolCall

# The DSML prefix before a tag name (``｜｜DSML｜｜``) is absent or starts with a non-word
# character; requiring that releases ordinary text like ``x<y`` at once instead of holding it.
_PREFIX = r"(?:[^\w<>\s/][^<>\s/]{0,23})?"
_FLAGS = re.IGNORECASE | re.DOTALL


def _chars(word: str) -> list[str]:
    return [re.escape(char) for char in word]


_INVOKE_TAIL = [r"\s+", *_chars("name"), r"\s*", "=", r"\s*", '"', r'[^"<>]*', '"', r"[^<>]*", ">"]
# Each start tag as a token list: the full regex joins them, and a nested-optional form of the
# same tokens recognises every proper prefix, which is what the stream has to hold back.
_START_TOKENS: dict[str, list[list[str]]] = {
    "tool_call": [["<", *_chars("tool_call"), ">"]],
    "dsml_block": [
        ["<", _PREFIX, *_chars(word), r"\s*", ">"] for word in ("tool_calls", "function_calls")
    ],
    "dsml_invoke": [["<", _PREFIX, *_chars("invoke"), *_INVOKE_TAIL]],
}


def _partial(tokens: list[str]) -> str:
    pattern = ""
    for token in reversed(tokens[1:]):
        pattern = f"(?:{token}{pattern})?"
    return tokens[0] + pattern


class _Patterns:
    """The scanner's regular expressions (~1.8 ms to compile), made at the first text a model
    streams rather than at import: a Run All's first request waits for this module (issue 28)."""

    def __init__(self) -> None:
        self.start = re.compile(
            "|".join(
                f"(?P<{kind}>{'|'.join(''.join(tokens) for tokens in variants)})"
                for kind, variants in _START_TOKENS.items()
            ),
            _FLAGS,
        )
        self.start_prefixes = [
            re.compile(_partial(tokens), _FLAGS)
            for variants in _START_TOKENS.values()
            for tokens in variants
        ]
        self.end = {
            "tool_call": re.compile(r"</tool_call\s*>", _FLAGS),
            "dsml_block": re.compile(rf"</{_PREFIX}(?:tool_calls|function_calls)\s*>", _FLAGS),
            "dsml_invoke": re.compile(rf"</{_PREFIX}invoke\s*>", _FLAGS),
        }
        invoke_start = r"<[^<>]*?invoke\s+name\s*=\s*\"([^\"]*)\"[^<>]*>"
        self.invoke = re.compile(
            invoke_start + r"(.*?)(?:</[^<>]*?invoke\s*>|(?=<[^<>]*?invoke\s)|\Z)", _FLAGS
        )
        self.parameter = re.compile(
            r"<[^<>]*?parameter\s+name\s*=\s*\"([^\"]*)\"([^<>]*)>"
            r"(.*?)(?:</[^<>]*?parameter\s*>|(?=<[^<>]*?parameter\s)|\Z)",
            _FLAGS,
        )
        self.string_attr = re.compile(r"string\s*=\s*\"true\"", re.IGNORECASE)
        self.name_field = re.compile(r"\"name\"\s*:\s*\"([^\"]*)\"")


_patterns = functools.cache(_Patterns)


def _held_from(buffer: str) -> int:
    """Where a start tag that may still complete begins; tags never contain a second ``<``."""
    index = buffer.rfind("<")
    if index >= 0 and any(prefix.fullmatch(buffer, index) for prefix in _patterns().start_prefixes):
        return index
    return len(buffer)


class TextToolCallFilter:
    """Hides tool-call markup from the visible channel while it streams.

    A block that is still open when the stream ends runs to the end: endpoints often stop on
    ``</tool_call>`` and never write it. The calls found so far are in ``calls``.
    """

    def __init__(self) -> None:
        self._buffer = ""
        self._open: tuple[str, str] | None = None  # (kind, start tag text)
        self._calls: list[ToolCall] = []

    @property
    def calls(self) -> list[ToolCall]:
        return list(self._calls)

    def feed(self, text: str) -> str:
        """Visible text that is safe to show now."""
        self._buffer += text
        visible: list[str] = []
        while True:
            if self._open is None:
                start = _patterns().start.search(self._buffer)
                if start is None:
                    break
                visible.append(self._buffer[: start.start()])
                self._open = (start.lastgroup or "", start.group())
                self._buffer = self._buffer[start.end() :]
            else:
                end = _patterns().end[self._open[0]].search(self._buffer)
                if end is None:
                    return "".join(visible)
                self._close(self._buffer[: end.start()])
                self._buffer = self._buffer[end.end() :]
        held = _held_from(self._buffer)
        visible.append(self._buffer[:held])
        self._buffer = self._buffer[held:]
        return "".join(visible)

    def flush(self) -> str:
        """Remaining visible text at the end of the stream."""
        visible = ""
        if self._open is None:
            visible = self._buffer
        else:
            self._close(self._buffer)
        self._buffer = ""
        return visible

    def _close(self, body: str) -> None:
        assert self._open is not None
        kind, start_tag = self._open
        self._open = None
        if kind == "tool_call":
            self._calls += _json_calls(body)
        elif kind == "dsml_invoke":
            self._calls += _dsml_calls(start_tag + body)
        else:
            self._calls += _dsml_calls(body) or extract_text_tool_calls(body)[0]


def extract_text_tool_calls(text: str) -> tuple[list[ToolCall], str]:
    """The tool calls written in ``text`` and the visible text with all markup removed."""
    text_filter = TextToolCallFilter()
    visible = text_filter.feed(text) + text_filter.flush()
    return text_filter.calls, visible


def _new_call(name: str, arguments: str) -> ToolCall:
    return ToolCall(id=f"call_text_{uuid.uuid4().hex[:12]}", name=name, arguments=arguments)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _dsml_calls(markup: str) -> list[ToolCall]:
    calls = []
    patterns = _patterns()
    for invoke in patterns.invoke.finditer(markup):
        arguments: dict[str, Any] = {}
        for name, attributes, value in patterns.parameter.findall(invoke.group(2)):
            arguments[name] = (
                value if patterns.string_attr.search(attributes) else _loads_or_str(value)
            )
        calls.append(_new_call(invoke.group(1).strip(), _dumps(arguments)))
    return calls


def _loads_or_str(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value.strip()


def _json_calls(body: str) -> list[ToolCall]:
    """Calls from a ``<tool_call>`` body; a body that is not a valid call is kept verbatim."""
    raw = _strip_fence(body.strip())
    if not raw:
        return []
    try:
        data = json.loads(raw)
    except ValueError:
        return [_malformed(raw)]
    items = data if isinstance(data, list) else [data]
    if not all(isinstance(item, dict) and isinstance(item.get("name"), str) for item in items):
        return [_malformed(raw)]
    return [_new_call(item["name"], _arguments_text(item)) for item in items]


def _arguments_text(item: dict[str, Any]) -> str:
    arguments = item.get("arguments", item.get("parameters"))
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        try:
            return _dumps(json.loads(arguments))
        except ValueError:
            return arguments
    return _dumps(arguments)


def _malformed(raw: str) -> ToolCall:
    """A call the loop can answer with an error the model reads, instead of losing it."""
    name = _patterns().name_field.search(raw)
    return _new_call(name.group(1) if name else "", raw)


def _strip_fence(text: str) -> str:
    if text.startswith("```") and text.endswith("```") and "\n" in text:
        return text[text.index("\n") + 1 : -3].strip()
    return text


def text_tool_instructions(tools: list[dict[str, Any]]) -> str:
    """System-prompt block that teaches a model without function calling to call tools."""
    lines = [
        "## Tools",
        "This endpoint has no native function calling. To call a tool, write exactly:",
        '<tool_call>{"name": "<tool name>", "arguments": {<arguments as JSON>}}</tool_call>',
        "",
        "Rules:",
        "- One <tool_call> block per call; the arguments are a JSON object that matches the "
        "tool's parameters schema.",
        "- After your tool call blocks, stop and wait: the result comes back in the next "
        "message. Never write a tool result yourself.",
        "- If no tool is needed, answer normally without any block.",
        "",
        "Available tools:",
    ]
    for tool in tools:
        function = tool.get("function", tool)
        lines.append(f"- {function['name']}: {function.get('description', '').strip()}")
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        lines.append(f"  parameters: {json.dumps(parameters, separators=(',', ':'))}")
    return "\n".join(lines)
