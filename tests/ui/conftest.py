"""The lab and fake_llm fixtures of tests/ui/test_lab.py, for every UI test module."""

from tests.ui.test_lab import fake_llm, lab  # noqa: F401
