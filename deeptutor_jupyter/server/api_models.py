"""The Memory and Knowledge tabs' REST bodies, as pydantic models.

The handlers (memory_api.py, kb_api.py, handlers.py) read requests and build replies through
them, and scripts/schema_ts.py writes their TypeScript interfaces into labextension/src/
contracts.ts, so the panel reads exactly what the server sends.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from deeptutor_jupyter.memory.consolidate import Mode

__all__ = [
    "AddKnowledgeBaseRequest",
    "ApplyReply",
    "ConsolidationPreview",
    "DiscardReply",
    "DocumentsReply",
    "JobReply",
    "KbJob",
    "KnowledgeBaseInfo",
    "KnowledgeState",
    "MasteryObjective",
    "MasteryReply",
    "MemoryDocument",
    "MemoryEntry",
    "PreviewChange",
    "PreviewReply",
    "PreviewRequest",
    "PreviewTrace",
    "RejectedOp",
    "SaveMemoryRequest",
]


class MemoryEntry(BaseModel):
    id: str = Field(description="`m_` and the entry's id, as the delete address takes it.")
    section: str
    text: str
    refs: list[str] = Field(description="The trace ids the entry cites (its provenance).")


class MemoryDocument(BaseModel):
    """A document as `GET memory` lists it, with its entries and their provenance."""

    layer: str
    key: str
    text: str
    empty: bool
    entries: list[MemoryEntry]


class DocumentsReply(BaseModel):
    """Every memory document, after a read or a write (`GET memory`, `PUT`, `DELETE`)."""

    documents: list[MemoryDocument]
    removed: int | None = Field(None, description="Entries a document's deletion removed.")


class SaveMemoryRequest(BaseModel):
    """`PUT memory/<layer>/<key>`: a human's edit of the whole document."""

    text: str


class PreviewRequest(BaseModel):
    """`POST memory/<layer>/<key>/preview`: which consolidation to run without writing."""

    mode: Mode = "update"


class PreviewTrace(BaseModel):
    trace_id: str
    question: str
    surface: str
    started_at: float | None


class PreviewChange(BaseModel):
    """One valid op in a learner's words (the server reads the old text from the document)."""

    kind: Literal["add", "edit", "delete"]
    section: str
    text: str
    old_text: str
    refs: list[str]
    reason: str


class RejectedOp(BaseModel):
    op: dict[str, Any]
    reason: str


class ConsolidationPreview(BaseModel):
    id: str
    layer: str
    key: str
    mode: Mode
    before: str
    after: str
    diff: str
    changed: bool
    has_work: bool
    ops: list[dict[str, Any]]
    changes: list[PreviewChange]
    rejected: list[RejectedOp]
    traces: list[PreviewTrace]


class PreviewReply(BaseModel):
    preview: ConsolidationPreview


class ApplyReply(BaseModel):
    """`POST memory/previews/<id>`: the preview was written."""

    applied: int
    documents: list[MemoryDocument]


class DiscardReply(BaseModel):
    discarded: bool


class KnowledgeBaseInfo(BaseModel):
    """A knowledge base as `GET kbs` lists it (knowledge/base.py `KnowledgeBase.info`)."""

    model_config = ConfigDict(extra="allow")

    name: str
    root: str | None
    sources: list[str]
    files: int
    chunks: int
    updated_at: str | None = Field(description="When it was last indexed, ISO 8601.")
    problem: str | None = Field(None, description="Why its index cannot be read, if it cannot.")


class KbJob(BaseModel):
    """An indexing job the server runs for `POST kbs`."""

    id: str
    name: str
    path: str = Field(description="As the learner gave it, relative to the server's root.")
    state: Literal["running", "done", "failed"]
    done: int
    total: int
    current: str
    summary: str
    errors: list[str]
    started_at: float
    finished_at: float | None


class KnowledgeState(BaseModel):
    """`GET kbs` and `DELETE kbs/<name>`: the knowledge bases and the indexing jobs."""

    kbs: list[KnowledgeBaseInfo]
    jobs: list[KbJob]


class AddKnowledgeBaseRequest(BaseModel):
    """`POST kbs`: index a folder or file, `path` relative to the server's root."""

    name: str
    path: str


class JobReply(BaseModel):
    job: KbJob


class MasteryObjective(BaseModel):
    """One objective as the mastery view shows it (server/mastery_api.py)."""

    id: str
    title: str = Field(description="Markdown with LaTeX, as the path wrote it.")
    status: Literal["mastered", "open", "locked", "other"] = Field(
        description="On the path (mastered, open: the one to work on, locked), or a quiz's "
        "objective that is not on it (other)."
    )
    mastery: float | None = Field(
        description="Probability the objective is known; None: no quiz yet."
    )
    answers: int = Field(description="Graded answers behind it.")
    confidence: str = Field(description="How much evidence stands behind it, in words.")
    review_due: float | None = Field(
        description="When its next review card is due (epoch seconds); None: no card."
    )


class MasteryReply(BaseModel):
    """``GET /deeptutor/api/mastery``: read-only; ``topic`` None when there is no learning path."""

    topic: str | None
    objectives: list[MasteryObjective]
    next: str | None = Field(description="The open objective's title; None when none is open.")
    due_now: int = Field(description="Review cards due now.")


def dump(model: BaseModel) -> dict[str, Any]:
    """A reply's JSON value: unset optional fields are left out, as the interfaces say."""
    return model.model_dump(mode="json", exclude_none=False, exclude_unset=True)
