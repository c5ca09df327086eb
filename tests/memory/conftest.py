from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.memory import MemoryStore, TraceRecord


def make_record(trace_id: str, **overrides: Any) -> TraceRecord:
    now = overrides.pop("started_at", time.time())
    fields: dict[str, Any] = {
        "trace_id": trace_id,
        "session_id": "nb-1",
        "turn_id": f"turn-{trace_id}",
        "model": "fake",
        "started_at": now,
        "finished_at": now + 1,
        "question": f"question of {trace_id}",
        "answer_summary": f"answer of {trace_id}",
    }
    return TraceRecord(**(fields | overrides))


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "home")
