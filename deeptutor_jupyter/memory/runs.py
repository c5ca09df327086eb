"""The consolidation log: what each background run did, for the workbench and for provenance.

``memory/consolidation.jsonl`` holds one JSON line per run: when, which model, and for each
document the trace ids it consumed (marked seen by that run), the ops it applied (kind, entry id,
the traces each cites; never the text, which the document itself holds) and what went wrong.
Lines are appended with one ``write``, so kernels sharing a home never tear each other's lines.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from deeptutor_jupyter.memory._files import append_line

Status = Literal["done", "failed", "busy"]
LOG_NAME = "consolidation.jsonl"
_TAIL_BYTES = 64 * 1024  # the last runs are all the workbench shows


@dataclass
class DocumentRun:
    """One document in one run."""

    document: str  # "L2/notebook.md"
    status: Status = "done"
    consumed: list[str] = field(default_factory=list)  # trace ids this run marked seen
    ops: list[dict[str, Any]] = field(default_factory=list)  # {"op", "id", "refs"}
    rejected: int = 0
    error: str = ""
    unseen: int = 0  # traces waiting for this document when the run started


@dataclass
class RunRecord:
    at: float
    trigger: str  # "auto"
    model: str
    documents: list[DocumentRun] = field(default_factory=list)
    error: str = ""  # the run as a whole could not start (no model)

    @property
    def failed(self) -> bool:
        return bool(self.error) or any(d.status == "failed" for d in self.documents)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> RunRecord | None:
        try:
            raw = json.loads(line)
            documents = [DocumentRun(**d) for d in raw.pop("documents", [])]
            return cls(documents=documents, **raw)
        except (ValueError, TypeError):
            return None  # a line torn by a full disk is skipped, not fatal


def op_summary(op: dict[str, Any]) -> dict[str, Any]:
    """An applied op as provenance: kind, entry id and cited traces, without its text."""
    out: dict[str, Any] = {"op": op.get("op", "")}
    if op.get("id"):
        entry_id = str(op["id"])
        out["id"] = entry_id if entry_id.startswith("m_") else f"m_{entry_id}"
    if op.get("refs"):
        out["refs"] = list(op["refs"])
    if op.get("reason"):
        out["reason"] = op["reason"]
    return out


class RunLog:
    def __init__(self, memory_root: Path) -> None:
        self.path = Path(memory_root) / LOG_NAME

    def append(self, record: RunRecord) -> None:
        append_line(self.path, record.to_json())

    def recent(self, limit: int = 20) -> list[RunRecord]:
        """The last ``limit`` runs, oldest first; reads only the file's tail."""
        try:
            with self.path.open("rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - _TAIL_BYTES))
                data = fh.read()
        except FileNotFoundError:
            return []
        lines = data.decode("utf-8", errors="replace").splitlines()
        if len(data) >= _TAIL_BYTES:
            lines = lines[1:]  # the first line may start mid-way
        records = [r for r in map(RunRecord.from_json, lines) if r is not None]
        return records[-limit:]

    def last(self) -> RunRecord | None:
        runs = self.recent(1)
        return runs[-1] if runs else None

    def last_for(self, document: str) -> DocumentRun | None:
        for record in reversed(self.recent()):
            for doc in record.documents:
                if doc.document == document:
                    return doc
        return None
