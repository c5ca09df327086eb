"""How a surface asks for a turn (``AskOptions``), and the ids and model profile of one."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.config import Settings
    from deeptutor_jupyter.runtime.context import AttachedContext, ModelProfile


@dataclass
class AskOptions:
    """How a surface wants a turn run, besides the question and the settings."""

    new: bool = False
    kbs: list[str] = field(default_factory=list)
    user_tools: tuple[str, ...] | None = None
    no_tools: bool = False
    attachments: list[Path] = field(default_factory=list)
    # Notebook context resolved by the surface (kernel/attachments.py): shown as tool cards.
    context: list[AttachedContext] = field(default_factory=list)
    cell_id: str | None = None
    # Where the turn shows, for a learner answering from elsewhere: {"notebook", "cell"}.
    place: dict[str, Any] | None = None
    # False where no form can be shown (a terminal): ask_user gets its degraded result.
    interactive: bool = True
    # The tags of the cell asked about, for the instructor's policy (learning/policy.py).
    tags: tuple[str, ...] = ()
    # That cell's hidden tests (an exercise): a hints answer that passes them is withheld.
    hidden_tests: str = ""
    # "chat", or "solve": a guided solve with the solve tools (deeptutor_jupyter/solve).
    capability: str = "chat"
    # The learner's own words when the question sent is composed for them (`%tutor why`,
    # `--cell N`, `%tutor learn`): the panel shows and names the conversation by these; the
    # question sent stays in the store and the trace.
    shown: str | None = None
    # The question sent is instructions composed for the model (`%tutor learn`), not the
    # learner's context (`why`, `--cell`): the cell shows ``shown`` in its place too.
    instructions: bool = False
    # Regenerate (runtime/session_edits.py): the new turn's id, minted before it starts, and
    # the turn it replaces, named in its turn_started event and its trace.
    turn_id: str | None = None
    replaces: str | None = None


def new_session_id(notebook: str) -> str:
    digest = hashlib.sha1(notebook.encode("utf-8")).hexdigest()[:10]
    return f"nb-{digest}-{uuid.uuid4().hex[:8]}"


def new_turn_id() -> str:
    return f"turn-{uuid.uuid4().hex[:12]}"


def profile_of(s: Settings) -> ModelProfile:
    """The model a turn talks to, from the effective settings (never the key)."""
    from deeptutor_jupyter.runtime.context import ModelProfile

    return ModelProfile(
        provider=s.provider or "",
        model=s.model or "",
        base_url=s.base_url,
        max_rounds=s.max_rounds,
        max_tool_calls=s.max_tool_calls,
        max_tokens=s.max_tokens,
        temperature=s.temperature,
    )
