from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deeptutor_jupyter.testing import FakeLLMServer
from tests.hub.harness import UPSTREAM_KEY, Hub


@pytest.fixture
def upstream() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(api_key=UPSTREAM_KEY, models=["fake-model", "fake-large"]) as server:
        yield server


@pytest.fixture
def hub(tmp_path: Path, upstream: FakeLLMServer) -> Iterator[Hub]:
    running = Hub(tmp_path, upstream.url, daily_tokens=1_000)
    try:
        yield running
    finally:
        running.stop()
