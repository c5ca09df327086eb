"""Every event a turn emits, as one pydantic discriminated union on ``type``.

This is the contract the surfaces are written against: the cell's view, the sidebar (whose
TypeScript types are generated from this schema: scripts/schema_ts.py) and the hub. Field names are
snake_case throughout; only what the model itself writes and reads (ask_user's arguments and tool
result, see interaction/schema.py) keeps the reference protocol's camelCase.

Events of the attachment-reading pass carry ``explore: true`` so a surface can fold them away.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from deeptutor_jupyter.interaction.schema import AskUserPayload


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    seq: int = Field(ge=1, description="Per turn, strictly increasing, continued after a resume.")
    turn_id: str
    ts: float = Field(description="Unix time when the event was emitted.")
    explore: bool = Field(False, description="Part of the attachment-reading pass.")


class TurnStarted(_Event):
    type: Literal["turn_started"] = "turn_started"
    session_id: str
    question: str
    model: str
    capability: str = "chat"
    resumed: bool = False


class RoundStarted(_Event):
    type: Literal["round_started"] = "round_started"
    round: int
    phase: str


class Content(_Event):
    type: Literal["content"] = "content"
    text: str


class Thinking(_Event):
    type: Literal["thinking"] = "thinking"
    text: str


class ToolCallStarted(_Event):
    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: str = Field(description="The JSON text the model wrote.")


class ToolCallFinished(_Event):
    type: Literal["tool_result"] = "tool_result"
    id: str
    name: str
    content: str
    is_error: bool = False
    summary: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class UserInputRequired(_Event, AskUserPayload):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["user_input_required"] = "user_input_required"


class UserInputResolved(_Event):
    type: Literal["user_input_resolved"] = "user_input_resolved"
    id: str = Field(description="The request id of the question.")
    tool_call_id: str
    selections: list[str] = Field(default_factory=list)
    custom_input: str = ""
    cancelled: bool = False
    reason: str = Field("", description="timeout | turn_stopped when not a learner's answer.")


class QuizRequired(_Event):
    """make_quiz's form (interaction/quiz.py): the public view only, never the answers."""

    type: Literal["quiz_required"] = "quiz_required"
    id: str = Field(description="The quiz id.")
    tool_call_id: str
    session_id: str
    kind: Literal["tool", "review"] = "tool"
    expires_at: float
    title: str
    objective: str = ""
    questions: list[dict[str, Any]]


class QuizResolved(_Event):
    """The graded result (the tool result of the make_quiz call), or why there is none."""

    type: Literal["quiz_resolved"] = "quiz_resolved"
    id: str
    tool_call_id: str
    score: float | None = None
    results: list[dict[str, Any]] = Field(default_factory=list)
    cancelled: bool = False
    reason: str = Field("", description="timeout | turn_stopped | learner_cancelled.")


class Sources(_Event):
    type: Literal["sources"] = "sources"
    hits: list[dict[str, Any]]


class Notice(_Event):
    model_config = ConfigDict(extra="allow", frozen=True)  # the explore pass adds its numbers
    type: Literal["notice"] = "notice"
    text: str
    stage: str | None = None


class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    kind: str
    message: str
    hint: str = ""
    status: int | None = None
    detail: str = ""


class Done(_Event):
    type: Literal["done"] = "done"
    status: Literal["done", "error", "cancelled"]
    answer: str = ""
    rounds: int = 0
    usage: dict[str, int] = Field(default_factory=dict)
    elapsed: float = 0.0


TurnEvent = Annotated[
    TurnStarted
    | RoundStarted
    | Content
    | Thinking
    | ToolCallStarted
    | ToolCallFinished
    | UserInputRequired
    | UserInputResolved
    | QuizRequired
    | QuizResolved
    | Sources
    | Notice
    | ErrorEvent
    | Done,
    Field(discriminator="type"),
]

_ADAPTER: TypeAdapter[TurnEvent] | None = None


def adapter() -> TypeAdapter[TurnEvent]:
    global _ADAPTER
    if _ADAPTER is None:
        _ADAPTER = TypeAdapter(TurnEvent)
    return _ADAPTER


def parse_event(envelope: dict[str, Any]) -> TurnEvent:
    """Validate one event (``type``, ``seq``, ``turn_id``, ``ts`` and its fields)."""
    return adapter().validate_python(envelope)


def events_schema() -> dict[str, Any]:
    """The JSON Schema of every event; what ``deeptutor-jupyter schema events`` prints."""
    schema = adapter().json_schema(mode="serialization")
    schema["title"] = "DeepTutorTurnEvent"
    return schema
