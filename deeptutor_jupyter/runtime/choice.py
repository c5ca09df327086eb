"""The model and knowledge bases a learner chose for one conversation (the Tutor panel's chooser).

A choice belongs to a conversation and is kept in its row of the store, so it outlives the
kernel; it applies to every next turn of that conversation, asked in the panel or in a ``%tutor``
cell (a cell's own ``--model`` or ``--kb`` wins for that cell). What may be chosen: the models
the learner configured (``model`` and ``models`` in the settings) or, on a hub, the course's
models, narrowed by the instructor's policy (``models`` in TUTOR.md); the learner's knowledge
bases. Names only: no key or URL is ever part of a choice or of what the panel is offered.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.errors import DeepTutorError

if TYPE_CHECKING:
    from pathlib import Path

    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.learning.policy import Decision
    from deeptutor_jupyter.store.db import Store

SOURCE = "the Tutor panel"  # the settings source of a chosen model (``%tutor config`` shows it)
MODEL_FLAG = "--model"  # a cell's own flag: it wins over the conversation's choice


class ChoiceError(DeepTutorError, ValueError):
    """A model or knowledge base that may not be chosen; the message says what may."""

    code = "choice"


@dataclass(frozen=True)
class Choice:
    model: str | None = None  # None: the configured model
    kbs: tuple[str, ...] = ()

    def wire(self) -> dict[str, Any]:
        return {"model": self.model, "kbs": list(self.kbs)}


def offered_models(resolved: ResolvedSettings, decision: Decision) -> list[str]:
    """The models the learner may choose: the course's on a hub (never one it does not offer),
    else the configured ones; only those the policy allows when it names models."""
    from deeptutor_jupyter.config import HUB_PROVIDER, hub_service

    s = resolved.settings
    if s.provider == HUB_PROVIDER:
        service = hub_service()
        names = list(service.models) if service is not None and service.models else []
        if not names and s.model:
            names = [s.model]  # a course set up before it announced its list: its one model
    else:
        names = [m for m in (s.model, *s.models) if m]
    names = list(dict.fromkeys(names))
    if decision.models:
        names = [m for m in names if m in decision.models]
    return names


def check_model(model: str, offered: list[str], decision: Decision) -> None:
    """Refuse a model that is not offered, saying which are and why."""
    if model in offered:
        return
    if decision.models and model not in decision.models:
        allowed = ", ".join(decision.models)
        raise ChoiceError(
            f"Your instructor's policy ({decision.source}) allows only these models here: "
            f"{allowed}. Choose one of them in the Tutor panel."
        )
    listed = ", ".join(offered) or "none"
    raise ChoiceError(
        f"The model {model!r} is not one you can use here. Available: {listed}. More models of "
        "your provider are added with the `models` setting (docs/configuration.md)."
    )


def kb_names(home: Path) -> list[str]:
    """The learner's knowledge bases, by name: what may be chosen."""
    from deeptutor_jupyter.knowledge import list_kbs

    return [str(kb["name"]) for kb in list_kbs(home)]


def check_kbs(kbs: tuple[str, ...], known: list[str]) -> None:
    unknown = [k for k in kbs if k not in known]
    if unknown:
        listed = ", ".join(known) or "none yet"
        raise ChoiceError(
            f"No knowledge base named {', '.join(unknown)}. Known: {listed}. "
            "Create one in the Knowledge tab or with `%tutor kb add <name> <folder>`."
        )


def read_choice(store: Store, session_id: str) -> Choice:
    raw = store.session_choice(session_id) or {}
    model = raw.get("model")
    kbs = raw.get("kbs") or []
    return Choice(model if isinstance(model, str) and model else None, tuple(map(str, kbs)))


def save_choice(store: Store, session_id: str, choice: Choice) -> bool:
    empty = choice.model is None and not choice.kbs
    return store.set_session_choice(session_id, None if empty else choice.wire())


def with_model(resolved: ResolvedSettings, model: str) -> ResolvedSettings:
    """The same settings talking to ``model`` (the same provider, URL and key)."""
    settings = resolved.settings.model_copy(update={"model": model})
    return replace(resolved, settings=settings, sources={**resolved.sources, "model": SOURCE})


def chosen_by_cell(resolved: ResolvedSettings) -> bool:
    """A cell that names its own model keeps it."""
    return resolved.sources.get("model") == MODEL_FLAG
