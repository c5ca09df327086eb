"""Every event a turn emits, as one pydantic discriminated union on ``type``.

An emitter builds the event itself (``Content(text=...)``); the log stamps it with the turn's
``seq``, ``turn_id`` and ``ts`` (``Event``), so no emitter can get a number wrong. Subscribers
``match`` on ``event.body``. On the wire and in the store an event is one flat object, its fields
beside ``type``, ``seq``, ``turn_id`` and ``ts`` (``Event.envelope``, ``events_schema``).

This is the contract the surfaces are written against: the cell's view, the sidebar (whose
TypeScript types are generated from this schema: scripts/schema_ts.py) and the hub. Field names are
snake_case throughout; only what the model itself writes and reads (ask_user's arguments and tool
result, see interaction/schema.py) keeps the reference protocol's camelCase.

Events of the attachment-reading pass carry ``explore: true`` so a surface can fold them away.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, GetCoreSchemaHandler, TypeAdapter
from pydantic_core import core_schema

from deeptutor_jupyter.interaction.schema import AskUserPayload
from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.learning.quiz import GradedItem, QuizOutcome


class _Stamp(LazyModel):
    """What the log adds to every event, beside the body's fields on the wire."""

    seq: int = Field(ge=1, description="Per turn, strictly increasing, continued after a resume.")
    turn_id: str
    ts: float = Field(description="Unix time when the event was emitted.")


STAMP = tuple(_Stamp.model_fields)


class _Event(LazyModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    explore: bool = Field(False, description="Part of the attachment-reading pass.")


class TurnStarted(_Event):
    type: Literal["turn_started"] = "turn_started"
    session_id: str
    question: str
    model: str
    capability: str = "chat"
    resumed: bool = False
    # The knowledge bases selected for the turn (the conversation's choice, or --kb).
    kbs: list[str] = Field(default_factory=list)
    replaces: str | None = Field(
        None, description="The turn this one regenerates: it takes that turn's place."
    )


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
    results: list[GradedItem] = Field(default_factory=list)
    cancelled: bool = False
    reason: str = Field("", description="timeout | turn_stopped | learner_cancelled.")

    @property
    def outcome(self) -> QuizOutcome:
        return QuizOutcome(
            score=self.score, results=self.results, cancelled=self.cancelled, reason=self.reason
        )


class Sources(_Event):
    type: Literal["sources"] = "sources"
    hits: list[dict[str, Any]]


class Notice(_Event):
    model_config = ConfigDict(extra="allow", frozen=True)  # rows of older versions may have more
    type: Literal["notice"] = "notice"
    text: str
    stage: str | None = Field(None, description="start | nudge | end (reading), compacted.")
    retry_in: float | None = Field(None, description="Seconds until a 429/5xx is retried.")
    reason: str = Field("", description="Why the request is retried.")
    status: int | str | None = Field(
        None, description="The HTTP status of a retry; done | error when the reading ends."
    )
    attachments: list[dict[str, Any]] | None = Field(None, description="What is being read.")
    reads: int | None = None
    rounds: int | None = None
    usage: dict[str, int] | None = None


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

StreamedEvent = Content | Thinking  # deltas of one text; the log batches their rows
Emit = Callable[[TurnEvent], object]  # what an emitter is handed (runtime/events.py EventLog.emit)


@dataclass(frozen=True)
class Event:
    """An event as the log published it: the emitter's ``body`` and the log's stamp."""

    body: TurnEvent
    seq: int
    turn_id: str
    ts: float

    def fields(self) -> dict[str, Any]:
        """The body's fields as the store keeps them: what the emitter set, without ``type``."""
        return self.body.model_dump(mode="json", exclude_unset=True, exclude={"type"})

    def envelope(self) -> dict[str, Any]:
        """The event as surfaces receive it: its fields beside type, seq, turn_id and ts."""
        return {
            **self.fields(),
            "type": self.body.type,
            "seq": self.seq,
            "turn_id": self.turn_id,
            "ts": self.ts,
        }

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        """A field typed ``Event`` (the panel's ``EventMessage``) is the flat wire object: the
        body validated as ``TurnEvent``, the stamp beside it; its JSON Schema is the union's."""
        union = handler.generate_schema(TurnEvent)

        def validate(value: Any, body: core_schema.ValidatorFunctionWrapHandler) -> Event:
            if isinstance(value, Event):
                return value
            if not isinstance(value, dict):
                raise ValueError("an event is an object")
            stamp = _Stamp.model_validate({k: value.get(k) for k in STAMP})
            rest = {k: v for k, v in value.items() if k not in STAMP}
            return cls(body(rest), stamp.seq, stamp.turn_id, stamp.ts)

        return core_schema.no_info_wrap_validator_function(
            validate,
            union,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda event: event.envelope()
            ),
            metadata={"pydantic_js_functions": [lambda _schema, json: json(union)]},
        )

    @classmethod
    def from_row(cls, kind: str, seq: int, turn_id: str, data: dict[str, Any], ts: float) -> Event:
        """An event read back from the store's ``events`` row."""
        return cls(adapter().validate_python({**data, "type": kind}), seq, turn_id, ts)


_ADAPTER: TypeAdapter[TurnEvent] | None = None
_WIRE: TypeAdapter[Event] | None = None


def adapter() -> TypeAdapter[TurnEvent]:
    global _ADAPTER
    if _ADAPTER is None:
        _ADAPTER = TypeAdapter(TurnEvent)
    return _ADAPTER


def parse_event(envelope: dict[str, Any]) -> Event:
    """Validate one flat event (``type``, ``seq``, ``turn_id``, ``ts`` and its fields)."""
    global _WIRE
    if _WIRE is None:
        _WIRE = TypeAdapter(Event)
    return _WIRE.validate_python(envelope)


def stamped(schema: dict[str, Any]) -> dict[str, Any]:
    """An event body's JSON Schema as it is on the wire: the stamp's fields first, required."""
    stamp = _Stamp.model_json_schema(mode="serialization")
    return {
        **schema,
        "properties": {**stamp["properties"], **schema.get("properties", {})},
        "required": [*STAMP, *schema.get("required", [])],
    }


def events_schema() -> dict[str, Any]:
    """The JSON Schema of every event; what ``deeptutor-jupyter schema events`` prints."""
    schema = adapter().json_schema(mode="serialization")
    names = {ref["$ref"].rsplit("/", 1)[-1] for ref in schema["oneOf"]}
    for name in names:
        schema["$defs"][name] = stamped(schema["$defs"][name])
    schema["title"] = "DeepTutorTurnEvent"
    return schema
