from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deeptutor_jupyter.testing import FakeLLMServer
from tests.e2e.kernel_driver import SECRET, KernelDriver, kernel_env, loaded_kernel

__all__ = ["SECRET", "kernel_env"]


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def kernel(tmp_path: Path, fake_llm: FakeLLMServer) -> Iterator[KernelDriver]:
    with loaded_kernel(kernel_env(tmp_path, fake_llm), tmp_path) as driver:
        yield driver
