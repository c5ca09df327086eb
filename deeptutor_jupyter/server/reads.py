"""What the sidebar reads across notebooks, as plain JSON-ready dicts.

Kept apart from the handlers so each read is a function of the learner's files that a test can
call without a server.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator
from deeptutor_jupyter.interaction.schema import AskUserPayload
from deeptutor_jupyter.knowledge.base import remove_kb
from deeptutor_jupyter.knowledge.listing import list_kbs
from deeptutor_jupyter.memory.document import parse
from deeptutor_jupyter.memory.store import L3_KEYS, MemoryStore
from deeptutor_jupyter.memory.trace import SURFACE_RE
from deeptutor_jupyter.server.api_models import KnowledgeBaseInfo, MemoryDocument, MemoryEntry
from deeptutor_jupyter.store.db import Store


class PendingQuestion(AskUserPayload):
    """A waiting question as ``GET /deeptutor/api/pending`` lists it."""

    status: str
    turn_id: str
    created_at: float
    notebook: str = Field(description="The notebook it waits in, relative to the server root.")
    continues_in: dict[str, Any] = Field(
        default_factory=dict, description="Where its turn goes on: notebook and cell."
    )


class PendingQuiz(BaseModel):
    """An open quiz or review as ``GET /deeptutor/api/pending`` lists it (``quizzes``): its
    public form only. It is answered in a notebook's kernel (comm ``quiz_answer``), which grades
    it from the stored quiz; its turn goes on in its owner's cell."""

    id: str
    tool_call_id: str
    session_id: str
    kind: Literal["tool", "review"] = "tool"
    expires_at: float
    title: str
    objective: str = ""
    questions: list[dict[str, Any]]
    status: str
    turn_id: str
    created_at: float
    notebook: str = Field(description="The notebook it waits in, relative to the server root.")
    continues_in: dict[str, Any] = Field(
        default_factory=dict, description="Where its turn goes on: notebook and cell."
    )


def pending_quizzes(store: Store, coordinator: InteractionCoordinator) -> list[dict[str, Any]]:
    """Every open quiz and review of the learner, oldest first, with the notebook it waits in."""
    # This server does not grade, so it cannot close a quiz that timed out: it just omits it.
    now = time.time()
    rows = [r for r in store.pending_for(None) if r.kind != "ask_user" and r.expires_at > now]
    out = []
    for row in rows:
        quiz = PendingQuiz.model_validate(
            {
                **row.payload,
                "status": row.status,
                "turn_id": row.turn_id,
                "created_at": row.created_at,
                "notebook": store.notebook_of(row.session_id) or "",
                "continues_in": row.place or {},
            }
        )
        out.append(quiz.model_dump(mode="json"))
    return out


def pending_questions(store: Store, coordinator: InteractionCoordinator) -> list[dict[str, Any]]:
    """Every waiting question of the learner, oldest first, with the notebook it waits in.

    ``resumable`` is the reference's flag: False only when no process can continue the turn;
    the sidebar then shows the not-resumable notice instead of a form.
    """
    # Quizzes and reviews are answered in a kernel (graded there from the stored quiz, with
    # the kernel's model and sandbox); this server lists the questions it can take.
    rows = [r for r in coordinator.expire_stale(store.pending_for(None)) if r.kind == "ask_user"]
    notebooks: dict[str, str] = {}
    out = []
    for row in rows:
        if row.session_id not in notebooks:
            notebooks[row.session_id] = store.notebook_of(row.session_id) or ""
        question = PendingQuestion.model_validate(
            {
                **row.payload,
                "status": row.status,
                "turn_id": row.turn_id,
                "created_at": row.created_at,
                "notebook": notebooks[row.session_id],
                # Whether an answer given here reaches a turn: a live kernel waits on it (it
                # continues in that kernel's cell), or none can and the panel says so.
                "resumable": coordinator.answerable(row),
                "continues_in": row.place or {},
            }
        )
        out.append(question.model_dump(mode="json"))
    return out


def memory_documents(home: Path) -> list[dict[str, Any]]:
    """The L3 documents (fixed keys) and every L2 document on disk, with their Markdown."""
    memory = MemoryStore(home)
    docs = [("L3", key) for key in L3_KEYS]
    l2 = memory.root / "L2"
    if l2.is_dir():
        docs += [("L2", p.stem) for p in sorted(l2.glob("*.md")) if SURFACE_RE.match(p.stem)]
    out = []
    for layer, key in docs:
        text = memory.read_text(layer, key)
        doc = MemoryDocument(
            layer=layer, key=key, text=text, empty=not text.strip(), entries=memory_entries(text)
        )
        out.append(doc.model_dump(mode="json"))
    return out


def memory_entries(text: str) -> list[MemoryEntry]:
    """A document's entries with their provenance (the trace ids each one cites)."""
    return [
        MemoryEntry(id=f"m_{entry.id}", section=section.name, text=entry.text, refs=entry.refs)
        for section, entry in parse(text).entries()
    ]


def save_memory_document(home: Path, layer: str, key: str, text: str) -> None:
    """A human's edit; ``DocumentError`` (a ValueError) names the bad line, nothing is saved."""
    MemoryStore(home).overwrite(layer, key, text)


def kb_list(home: Path) -> list[dict[str, Any]]:
    return [
        KnowledgeBaseInfo.model_validate(info).model_dump(mode="json", exclude_unset=True)
        for info in list_kbs(home)
    ]


def remove_knowledge_base(home: Path, name: str) -> None:
    """``KnowledgeBaseNotFound`` (a LookupError) when there is none; ValueError for a bad name."""
    remove_kb(home, name)


def traces(home: Path, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` L1 traces, newest first."""
    records = MemoryStore(home).traces()
    return [r.model_dump(mode="json") for r in reversed(records[-limit:])]
