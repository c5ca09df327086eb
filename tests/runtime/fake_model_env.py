"""The environment a ``TutorSession`` under test reads: a home in the test's folder and the
fake model server as its provider (the tests that drive a session in-process share it)."""

from __future__ import annotations

from pathlib import Path

import pytest


def use_fake_model(monkeypatch: pytest.MonkeyPatch, home: Path, url: str) -> None:
    for name, value in {
        "DEEPTUTOR_HOME": str(home),
        "DEEPTUTOR_PROVIDER": "custom",
        "DEEPTUTOR_BASE_URL": url,
        "DEEPTUTOR_MODEL": "fake",
    }.items():
        monkeypatch.setenv(name, value)
