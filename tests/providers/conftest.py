from __future__ import annotations

from collections.abc import Iterator

import pytest

from deeptutor_jupyter.testing import FakeLLMServer
from deeptutor_jupyter.testing.ports import refused_url


class SleepRecorder:
    """Stands in for asyncio.sleep so backoff is observable and tests stay fast."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def dead_url() -> str:
    """A loopback URL where connecting is refused for the whole test."""
    return refused_url()
