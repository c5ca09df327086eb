"""Every test runs without a real model key: no test can reach a real model, even by accident.

Background memory consolidation is off unless a test turns it on: it would ask the scripted
FakeLLMServer for replies that belong to the test's turns (tests/runtime/test_upkeep.py and
tests/e2e/test_upkeep_kernel.py turn it on and script its replies)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# Property tests judge results, never time: on a loaded 2-core machine the default deadline and
# the "input generation is slow" health check failed a correct round trip.
settings.register_profile("deeptutor", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("deeptutor")

# A real endpoint would need one of these; the tests talk to FakeLLMServer only.
_REAL_MODEL_ENV = ("OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_BASE_URL")


# Set for the whole process too: servers started by module-scoped fixtures inherit it. Tests that
# build a child's environment without the parent's DEEPTUTOR_* variables set it themselves.
AUTO_CONSOLIDATE_OFF = {"DEEPTUTOR_AUTO_CONSOLIDATE": "false"}
os.environ.update(AUTO_CONSOLIDATE_OFF)


@pytest.fixture(autouse=True)
def _no_real_model_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.endswith("_API_KEY") or name in _REAL_MODEL_ENV:
            monkeypatch.delenv(name, raising=False)
    for name, value in AUTO_CONSOLIDATE_OFF.items():
        monkeypatch.setenv(name, value)
