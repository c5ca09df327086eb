from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from deeptutor_jupyter.testing import FakeLLMServer
from tests.e2e.kernel_driver import KernelDriver

SECRET = "sk-e2e-SECRET-7f3a9c"


def kernel_env(tmp_path: Path, server: FakeLLMServer, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("DEEPTUTOR_") and not k.endswith("_API_KEY")
    }
    env.update(
        DEEPTUTOR_HOME=str(tmp_path / "home"),
        DEEPTUTOR_PROVIDER="custom",
        DEEPTUTOR_BASE_URL=server.url,
        DEEPTUTOR_MODEL="fake-model",
        DEEPTUTOR_API_KEY=SECRET,
        JPY_SESSION_NAME=str(tmp_path / "lesson.ipynb"),
        IPYTHONDIR=str(tmp_path / "ipython"),
        LANG="C.UTF-8",
    )
    env.update(extra)
    return env


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
