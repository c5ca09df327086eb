from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deeptutor_jupyter.testing import FakeLLMServer
from tests.hub.harness import UPSTREAM_KEY, Hub


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(api_key=UPSTREAM_KEY, models=["fake-model", "fake-large"]) as server:
        yield server


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, upstream: FakeLLMServer) -> Iterator[Hub]:
    """One hub per test module; each test uses its own students' budgets or resets them."""
    running = Hub(
        tmp_path_factory.mktemp("hub"),
        upstream.url,
        # A tutor's request is a few thousand tokens of prompt (its instructions and tools):
        # a budget below that admits nothing.
        daily_tokens=20_000,
        groups={"honours": {"daily_tokens": 50_000, "requests_per_minute": None}},
    )
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def hub_dir(hub: Hub) -> Path:
    return hub.tmp
