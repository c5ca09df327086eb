"""The autouse fixture of tests/conftest.py: a key in the developer's environment never
reaches a test (run the suite with OPENAI_API_KEY set and this still passes)."""

from __future__ import annotations

import os


def test_no_model_key_reaches_a_test() -> None:
    assert [n for n in os.environ if n.endswith("_API_KEY")] == []
