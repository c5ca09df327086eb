"""The sidebar comm's messages (target ``deeptutor``) as pydantic models: what the panel may send
(``PanelAction``) and what the kernel sends back (``KernelMessage``). The panel's TypeScript types
are generated from these (scripts/schema_ts.py); kernel/comm.py validates every action with them,
so a malformed action is refused in words instead of failing somewhere inside a handler.

Imported with kernel/comm.py on the first comm open, never at ``%load_ext``.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from deeptutor_jupyter.agent.events import Event
from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.interaction.schema import Submission
from deeptutor_jupyter.learning.quiz import GradedItem


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CellAttachment(_Action):
    """A notebook cell as context: the cell the learner sees as ``[number]`` (``--cell N``).

    ``source`` and ``error`` are what the browser shows; they stand in only for a cell this
    kernel has not run (a Markdown cell, a cell not run since a restart).
    """

    kind: Literal["cell"]
    number: int | None = Field(None, ge=1, description="The execution count shown as [N].")
    cell_type: str = "code"
    source: str = Field("", max_length=200_000)
    error: str = Field("", max_length=200_000, description="Its error output, as plain text.")


class FileAttachment(_Action):
    """A file from the file browser, relative to the server's root (``notebook_path``'s root)."""

    kind: Literal["file"]
    path: str = Field(min_length=1, max_length=4096)


class QuoteAttachment(_Action):
    """Text the learner selected in a cell."""

    kind: Literal["quote"]
    text: str = Field(min_length=1, max_length=200_000)
    number: int | None = Field(None, ge=1, description="The [N] of the cell it was selected in.")


Attachment = Annotated[
    CellAttachment | FileAttachment | QuoteAttachment, Field(discriminator="kind")
]


class AskAction(_Action):
    """Ask in this notebook's current conversation (the same path as ``%tutor``).

    ``attachments`` are resolved in the kernel by the notebook-context tools
    (kernel/attachments.py); each shows as a tool card of the turn, as the model saw it.
    """

    action: Literal["ask"]
    question: str
    conversation: str | None = Field(None, description="Must be the current one when given.")
    attachments: list[Attachment] = Field(default_factory=list, max_length=10)
    notebook_path: str = Field(
        "", description="The notebook's path from the server's root; files are read under it."
    )


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


class RenameAction(_Action):
    """Name one of this notebook's conversations; an empty title goes back to its first question."""

    action: Literal["rename"]
    conversation: str
    title: str = Field(max_length=80)


class QuizAnswerAction(_Action):
    """Answers to a quiz of this notebook's turns; graded once, like the cell's quiz form."""

    action: Literal["quiz_answer"]
    quiz_id: str
    session_id: str
    answers: dict[str, Any]
    seconds: float | None = Field(None, ge=0)


class ChooseAction(_Action):
    """Choose the model (None: the configured one) and the knowledge bases of one of this
    notebook's conversations, for its next turns (runtime/choice.py); names only."""

    action: Literal["choose"]
    conversation: str = Field(min_length=1, max_length=100)
    model: str | None = Field(None, max_length=200)
    kbs: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(
        default_factory=list, max_length=10
    )


class RegenerateAction(_Action):
    """Ask the last question of the current conversation again; the new answer takes the place
    of ``turn_id``'s (refused unless that is still the last answer and nothing runs or waits)."""

    action: Literal["regenerate"]
    turn_id: str


class DeleteAction(_Action):
    """Delete one of this notebook's conversations (its waiting questions are cancelled)."""

    action: Literal["delete"]
    conversation: str


PanelAction = Annotated[
    AskAction
    | StopAction
    | AnswerAction
    | SubscribeAction
    | NewAction
    | SwitchAction
    | RenameAction
    | QuizAnswerAction
    | ChooseAction
    | RegenerateAction
    | DeleteAction,
    Field(discriminator="action"),
]
# The union's own `action` literals, in its order: adding an action to the union adds it here.
ACTIONS: tuple[str, ...] = tuple(
    typing.get_args(m.model_fields["action"].annotation)[0]
    for m in typing.get_args(typing.get_args(PanelAction)[0])
)


class TurnSummary(BaseModel):
    turn_id: str
    question: str
    status: str
    last_seq: int


class Conversation(BaseModel):
    id: str
    title: str = Field(
        description="The name the learner gave it, else its first question cut at 80 characters."
    )
    turns: int
    started_at: float


class EventMessage(BaseModel):
    """One runtime event (agent/events.py ``TurnEvent``); content deltas coalesced."""

    type: Literal["event"] = "event"
    event: Event


class TurnsMessage(BaseModel):
    """The current conversation's turns: on open, after ask/new/switch/rename, when a turn ends."""

    type: Literal["turns"] = "turns"
    session_id: str
    notebook: str
    turns: list[TurnSummary]
    conversations: list[Conversation]


class ChosenModels(BaseModel):
    """A conversation's choice: ``model`` None is the configured model."""

    model: str | None = None
    kbs: list[str] = Field(default_factory=list)


class ChoicesMessage(BaseModel):
    """What the chooser shows (on open, after choose/new/switch): the current conversation's
    choice and what may be chosen. Names only: never a key or a URL."""

    type: Literal["choices"] = "choices"
    session_id: str
    choice: ChosenModels
    models: list[str] = Field(description="The models it may use; the course's on a hub.")
    default_model: str = Field(description="The configured model, used when none is chosen.")
    kbs: list[str] = Field(description="The learner's knowledge bases.")


class ResolvedAnswer(Submission):
    reason: str = ""


class AnsweredMessage(BaseModel):
    """An answer given over the comm was taken (its turn's ``user_input_resolved`` follows)."""

    type: Literal["answered"] = "answered"
    request_id: str
    result: ResolvedAnswer


class AskedMessage(BaseModel):
    """An ask was taken: its turn started (its events follow)."""

    type: Literal["asked"] = "asked"
    turn_id: str


class QuizGradedMessage(BaseModel):
    """A quiz answered over the comm was graded (its turn's ``quiz_resolved`` follows)."""

    type: Literal["quiz_graded"] = "quiz_graded"
    quiz_id: str
    score: float | None = None
    results: list[GradedItem] = Field(default_factory=list)


class ErrorMessage(BaseModel):
    """A refused action, in words; ``code`` is the coordinator's for answers."""

    type: Literal["error"] = "error"
    action: str
    message: str
    code: str = "error"
    attachment: int | None = Field(None, description="For ask: the attachment that was refused.")
    quiz_id: str | None = Field(None, description="For quiz_answer: the quiz refused.")


KernelMessage = Annotated[
    EventMessage
    | TurnsMessage
    | AnsweredMessage
    | AskedMessage
    | QuizGradedMessage
    | ErrorMessage
    | ChoicesMessage,
    Field(discriminator="type"),
]

# The notebook on screen (kernel/live_notebook.py): the kernel opens a comm to this target and
# the labextension (labextension/src/livecells.ts) answers with the cells it shows, unsaved
# edits included. The limits bound what a frontend may send; the labextension cuts to them.
LIVE_TARGET = "deeptutor.notebook"
LIVE_MAX_CELLS = 500
LIVE_SOURCE_CHARS = 2000  # read_notebook shows no more of a cell (notebook_context.CELL_CHARS)
LIVE_OUTPUT_CHARS = 1500
LIVE_MAX_TAGS = 20


class LiveCellsRequest(BaseModel):
    """What the kernel sends when it opens a ``deeptutor.notebook`` comm."""

    request_id: str


class LiveCell(_Action):
    """One cell as the notebook on screen shows it, cut to the limits above."""

    cell_type: Literal["code", "markdown", "raw"]
    source: str = Field(max_length=LIVE_SOURCE_CHARS)
    source_length: int = Field(ge=0, description="The source's length before it was cut.")
    execution_count: int | None = Field(None, ge=0)
    tags: list[Annotated[str, Field(max_length=100)]] = Field(
        default_factory=list, max_length=LIVE_MAX_TAGS
    )
    outputs: str = Field(
        "", max_length=LIVE_OUTPUT_CHARS, description="Its text outputs, cut at the limit."
    )


class LiveCellsReply(_Action):
    """The labextension's answer: every cell of the notebook on screen, in order."""

    request_id: str = Field(max_length=100)
    cells: list[LiveCell] = Field(max_length=LIVE_MAX_CELLS)
    total_cells: int = Field(ge=0, description="How many cells it has; only the first are sent.")


_ACTION: TypeAdapter[PanelAction] | None = None
_MESSAGE: TypeAdapter[KernelMessage] | None = None


class BadAction(DeepTutorError, ValueError):
    code = "bad_action"

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
