"""The conversation's typed shapes, shared by the loop, the providers, the tools and the store.

Messages are OpenAI chat messages (``role``, ``content``, ``tool_calls``, ``tool_call_id``)
because most endpoints speak that and because they serialise into ``state.db`` unchanged, which
an exact resume after a kernel restart needs. They are ``TypedDict``s, so the checker knows their
keys and the wire and the store still see plain JSON objects. Providers that speak another wire
format (Anthropic) translate at their edge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Required

# typing_extensions' TypedDict: pydantic validates it on Python 3.11 (typing's it refuses).
from typing_extensions import TypedDict

Role = Literal["system", "user", "assistant", "tool"]


class FunctionCall(TypedDict):
    name: str
    arguments: str  # the JSON text the model wrote


class ToolCallMessage(TypedDict):
    id: str
    type: Literal["function"]
    function: FunctionCall


class Message(TypedDict, total=False):
    role: Required[Role]
    content: str | None
    tool_calls: list[ToolCallMessage]
    tool_call_id: str
    name: str
    reasoning_content: NotRequired[str]


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for; ``arguments`` is the raw JSON text it wrote."""

    id: str
    name: str
    arguments: str

    def to_message(self) -> ToolCallMessage:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass
class ToolResult:
    """``content`` is what the model reads; ``data`` and ``summary`` feed the UI card."""

    content: str
    is_error: bool = False
    data: dict[str, Any] | None = None
    summary: str = ""
    stop_turn: bool = False  # the turn ends after this result (a cancelled ask_user)
