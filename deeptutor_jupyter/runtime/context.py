"""The one object a turn carries from its entry point to its capability."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, SkipValidation

from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.messages import Message


class ModelProfile(LazyModel):
    """Which model a turn talks to and how; never holds the key."""

    model_config = ConfigDict(frozen=True)

    provider: str
    model: str
    base_url: str | None = None
    max_rounds: int = 8
    max_tool_calls: int = 32
    max_tokens: int | None = None
    temperature: float | None = None

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model}"


class AttachedContext(LazyModel):
    """Context the learner attached to the question (a cell, a file, a quote), read by a surface
    before the turn: shown as a tool card and sent to the model with the question."""

    id: str
    name: str
    arguments: str = "{}"
    content: str
    summary: str = ""


class TurnContext(LazyModel):
    session_id: str
    turn_id: str
    question: str
    profile: ModelProfile
    capability: str = "chat"
    # Not re-validated per turn: it comes from the store or the previous turns, already typed.
    history: Annotated[list[Message], SkipValidation] = Field(default_factory=list)
    enabled_tools: list[str] | None = None  # None: the capability's default tool set
    system_blocks: list[str] = Field(default_factory=list)
    cell_id: str | None = None
    attachments: list[str] = Field(default_factory=list)  # read by the explore pass first
    context: list[AttachedContext] = Field(default_factory=list)
    language: str = "en"
    metadata: dict[str, Any] = Field(default_factory=dict)
