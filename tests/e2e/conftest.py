from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deeptutor_jupyter.testing import FakeLLMServer
from tests.e2e.kernel_driver import SECRET, KernelDriver, kernel_env

__all__ = ["SECRET", "kernel_env"]


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def kernel(tmp_path: Path, fake_llm: FakeLLMServer) -> Iterator[KernelDriver]:
    driver = KernelDriver(kernel_env(tmp_path, fake_llm), cwd=tmp_path)
    try:
        driver.execute("%load_ext deeptutor_jupyter")
        yield driver
    finally:
        driver.shutdown()
