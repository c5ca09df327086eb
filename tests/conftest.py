"""Every test runs without a real model key: no test can reach a real model, even by accident."""

from __future__ import annotations

import os

import pytest

# A real endpoint would need one of these; the tests talk to FakeLLMServer only.
_REAL_MODEL_ENV = ("OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_BASE_URL")


@pytest.fixture(autouse=True)
def _no_real_model_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.endswith("_API_KEY") or name in _REAL_MODEL_ENV:
            monkeypatch.delenv(name, raising=False)
