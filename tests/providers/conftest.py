from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from deeptutor_jupyter.testing import FakeLLMServer


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
    """A loopback URL where nothing listens: the port was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
