"""The ``ask_user`` tool as the model sees it, derived from pydantic models.

What the model writes (``AskUserArgs``: ``allowCustom``, ``submitLabel``) and the tool result it
reads (``{"selections", "customInput", "cancelled"}``) keep the reference protocol's names: they are
the model's contract, named in its tool description. What the surfaces render (``AskUserPayload``,
carried by the ``user_input_required`` event) follows the events' one style, snake_case.
``options[].id`` is the stable value a submission carries; labels are for display only.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from deeptutor_jupyter import limits
from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult

Mode = Literal["single", "multiple", "text", "number", "date", "directory", "toggle"]
CHOICE_MODES = frozenset({"single", "multiple", "toggle"})


class AskOption(LazyModel):
    id: str = Field(
        min_length=1,
        max_length=limits.ASK_OPTION_ID_CHARS,
        description="Stable value sent back when chosen.",
    )
    label: str = Field(
        min_length=1,
        max_length=limits.ASK_OPTION_LABEL_CHARS,
        description="What the learner reads.",
    )
    description: str = Field(
        "",
        max_length=limits.ASK_OPTION_DESCRIPTION_CHARS,
        description="A short explanation shown under the label.",
    )
    recommended: bool = Field(False, description="Mark this option as the recommended one.")


class AskUserArgs(LazyModel):
    # The limits keep a form a form: a model's 2 MB title was shown and stored whole.
    title: str = Field(max_length=limits.ASK_TITLE_CHARS, description="The question, in one line.")
    description: str = Field(
        "",
        max_length=limits.ASK_DESCRIPTION_CHARS,
        description="What the learner needs to know to answer.",
    )
    mode: Mode = Field(description="Which control the form shows.")
    options: list[AskOption] = Field(
        default_factory=list,
        max_length=limits.ASK_OPTIONS,
        description="Choices for single, multiple and toggle modes.",
    )
    allowCustom: bool = Field(
        False, description="Also offer a free-text field for an answer outside the options."
    )
    submitLabel: str = Field(
        "", max_length=limits.ASK_SUBMIT_LABEL_CHARS, description="Text of the submit button."
    )

    @field_validator("title")
    @classmethod
    def _title_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("title must not be empty")
        return value

    @model_validator(mode="after")
    def _options_fit_the_mode(self) -> AskUserArgs:
        if self.mode in CHOICE_MODES and not self.options:
            raise ValueError(f"mode {self.mode!r} needs at least one option")
        ids = [o.id for o in self.options]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"option ids must be unique; repeated: {', '.join(duplicates)}")
        return self


class AskUserPayload(LazyModel):
    """What a surface renders for a waiting question: the ``user_input_required`` payload of the
    reference protocol. The coordinator builds it, the cell's card, the sidebar and the server
    read it; one model for all of them."""

    id: str = Field(description="The request id; a submission names it.")
    tool_call_id: str = Field(description="The tool call this question answers.")
    session_id: str = Field(description="Only this session may answer.")
    title: str
    description: str = ""
    mode: Mode
    options: list[AskOption] = Field(default_factory=list)
    allow_custom: bool = False
    submit_label: str = ""
    resumable: bool = Field(True, description="False: show the not-resumable notice only.")
    expires_at: float = Field(description="Unix time after which it times out.")


class Submission(LazyModel):
    """A learner's answer as every surface sends it (the reference's ``onSubmit(selections,
    customInput, cancelled)``): option ids, the free text, or a cancel."""

    selections: list[str] = Field(default_factory=list, description="Option ids, in order.")
    custom_input: str = Field("", description="Free text: the answer of a value mode, or Other.")
    cancelled: bool = False


class AskUserResult(LazyModel):
    """How a question ended, as the model reads it: the reference protocol's tool result
    ``{"selections", "customInput", "cancelled"}``, with ``reason`` when no learner answered."""

    model_config = ConfigDict(frozen=True)

    selections: list[str] = Field(default_factory=list)
    customInput: str = ""
    cancelled: bool = False
    reason: str = Field("", description="timeout | turn_stopped when no learner answered.")

    def wire(self) -> dict[str, Any]:
        """The tool result's JSON values (and the stored row's): ``reason`` only when set."""
        return self.model_dump(mode="json", exclude=set() if self.reason else {"reason"})


class AskUserTool(Tool[AskUserArgs]):
    """Never executed where a form can be shown: the coordinator intercepts it first.

    ``run`` is the explicit degraded result for a frontend without widgets (terminal IPython),
    so the model learns to ask in plain text instead and the loop goes on.
    """

    name: ClassVar[str] = "ask_user"
    description: ClassVar[str] = (
        "Ask the learner a structured question when you lack information you need to continue "
        "(their level, which approach they want, a value, a date, a folder). Modes: single, "
        "multiple, toggle (with options), text, number, date, directory. You receive "
        '{"selections": [option ids], "customInput": "...", "cancelled": false} as the result '
        "and continue the task."
    )
    Args: ClassVar[type[BaseModel]] = AskUserArgs

    async def run(self, args: AskUserArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult(
            content=(
                "ask_user needs the notebook's interactive form, and no widget frontend is "
                "available here. Ask your question in plain text in your answer instead."
            ),
            is_error=True,
            summary="no form available here",
        )


def payload(
    args: AskUserArgs, *, request_id: str, tool_call_id: str, session_id: str, expires_at: float
) -> dict[str, Any]:
    """The ``user_input_required`` payload, as plain JSON values."""
    return AskUserPayload(
        id=request_id,
        tool_call_id=tool_call_id,
        session_id=session_id,
        title=args.title,
        description=args.description,
        mode=args.mode,
        options=args.options,
        allow_custom=args.allowCustom,
        submit_label=args.submitLabel,
        resumable=True,
        expires_at=expires_at,
    ).model_dump(mode="json")
