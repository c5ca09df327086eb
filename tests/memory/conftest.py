from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.memory import MemoryStore, TraceRecord
from deeptutor_jupyter.providers import ChatModel, make_model
from deeptutor_jupyter.testing import FakeLLMServer, Reply


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


def ops_reply(*ops: dict[str, Any]) -> Reply:
    return Reply(text=json.dumps({"ops": list(ops)}))


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
async def model(server: FakeLLMServer) -> AsyncIterator[ChatModel]:
    chat = make_model(provider="custom", model="fake", base_url=server.url, max_retries=0)
    yield chat
    await chat.aclose()
