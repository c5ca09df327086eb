"""``SavedTurn``: the one snapshot of a turn paused on a deferred call (ask_user, make_quiz).

Built in one place (``Orchestrator._checkpoint``), saved beside the pending row, and read back
typed by whoever continues the turn (``TutorSession.resume``): nobody digs in a dict.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.runtime.context import TurnContext

STATE_VERSION = 1


class ModelCompat(LazyModel):
    """What the turn learned about its model before the pause (runtime degradations)."""

    stream_options: bool = True
    native_tools: bool = True


class SavedTurn(LazyModel):
    version: int = STATE_VERSION
    # The turn's context without its history: the loop state holds the messages.
    context: TurnContext
    # agent/loop.py's LoopState.to_json(): plain JSON, so another process can continue it.
    loop: dict[str, Any]
    compat: ModelCompat = Field(default_factory=ModelCompat)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"context": {"history"}})

    @property
    def waiting_on(self) -> str | None:
        """The tool call id the turn waits on."""
        call = self.loop.get("current_call") or {}
        found = call.get("id")
        return str(found) if found else None

    @property
    def profile_flags(self) -> dict[str, Any]:
        """The settings flags that select the turn's model again."""
        p = self.context.profile
        return {"provider": p.provider, "model": p.model, "base_url": p.base_url}

    @property
    def kbs(self) -> list[str]:
        return [str(kb) for kb in self.context.metadata.get("kbs", [])]


def read_saved(raw: dict[str, Any] | None) -> SavedTurn | None:
    """The snapshot, or None when there is none or it is of another version or damaged."""
    if not raw or raw.get("version") != STATE_VERSION:
        return None
    try:
        return SavedTurn.model_validate(raw)
    except ValidationError:
        return None
