"""The sidebar comm's messages (target ``deeptutor``) as pydantic models: what the panel may send
(``PanelAction``) and what the kernel sends back (``KernelMessage``). The panel's TypeScript types
are generated from these (scripts/schema_ts.py); kernel/comm.py validates every action with them,
so a malformed action is refused in words instead of failing somewhere inside a handler.

Imported with kernel/comm.py on the first comm open, never at ``%load_ext``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from deeptutor_jupyter.interaction.schema import Submission
from deeptutor_jupyter.runtime.event_types import TurnEvent


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AskAction(_Action):
    """Ask in this notebook's current conversation (the same path as ``%tutor``)."""

    action: Literal["ask"]
    question: str
    conversation: str | None = Field(None, description="Must be the current one when given.")


class StopAction(_Action):
    action: Literal["stop"]
    turn_id: str


class AnswerAction(Submission):
    """An answer to a question waiting in any notebook; it continues in that notebook's cell."""

    model_config = ConfigDict(extra="forbid")
    action: Literal["answer"]
    request_id: str
    session_id: str


class SubscribeAction(_Action):
    """Replay a turn's events with ``seq > after_seq``, then follow it live."""

    action: Literal["subscribe"]
    turn_id: str
    after_seq: int = Field(0, ge=0)


class NewAction(_Action):
    """Start a fresh conversation in this notebook (its next ``%tutor`` cell continues it)."""

    action: Literal["new"]


class SwitchAction(_Action):
    """Make another of this notebook's conversations the current one."""

    action: Literal["switch"]
    conversation: str


PanelAction = Annotated[
    AskAction | StopAction | AnswerAction | SubscribeAction | NewAction | SwitchAction,
    Field(discriminator="action"),
]
ACTIONS = ("ask", "stop", "answer", "subscribe", "new", "switch")


class TurnSummary(BaseModel):
    turn_id: str
    question: str
    status: str
    last_seq: int


class Conversation(BaseModel):
    id: str
    title: str = Field(description="Its first question, cut at 80 characters.")
    turns: int
    started_at: float


class EventMessage(BaseModel):
    """One runtime event (runtime/event_types.py ``TurnEvent``); content deltas coalesced."""

    type: Literal["event"] = "event"
    event: TurnEvent


class TurnsMessage(BaseModel):
    """The current conversation's turns: on open, after ask/new/switch, when a turn is done."""

    type: Literal["turns"] = "turns"
    session_id: str
    notebook: str
    turns: list[TurnSummary]
    conversations: list[Conversation]


class ResolvedAnswer(Submission):
    reason: str = ""


class AnsweredMessage(BaseModel):
    """An answer given over the comm was taken (its turn's ``user_input_resolved`` follows)."""

    type: Literal["answered"] = "answered"
    request_id: str
    result: ResolvedAnswer


class ErrorMessage(BaseModel):
    """A refused action, in words; ``code`` is the coordinator's for answers."""

    type: Literal["error"] = "error"
    action: str
    message: str
    code: str = "error"


KernelMessage = Annotated[
    EventMessage | TurnsMessage | AnsweredMessage | ErrorMessage, Field(discriminator="type")
]

_ACTION: TypeAdapter[PanelAction] | None = None
_MESSAGE: TypeAdapter[KernelMessage] | None = None


class BadAction(ValueError):
    def __init__(self, action: str, message: str) -> None:
        super().__init__(message)
        self.action = action


def parse_action(data: Any) -> PanelAction:
    """The panel's message as its action model; BadAction says in words what is wrong."""
    global _ACTION
    action = str(data.get("action")) if isinstance(data, dict) else "?"
    if action not in ACTIONS:
        raise BadAction(action, f"Unknown action {action!r}: {', '.join(ACTIONS)}.")
    if _ACTION is None:
        _ACTION = TypeAdapter(PanelAction)
    try:
        return _ACTION.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or action
        raise BadAction(action, f"Bad {action} message: {where}: {first['msg']}.") from None


def kernel_message(data: Any) -> KernelMessage:
    """Validate a message the kernel sent (the tests check every one of a session with this)."""
    global _MESSAGE
    if _MESSAGE is None:
        _MESSAGE = TypeAdapter(KernelMessage)
    return _MESSAGE.validate_python(data)
