"""The JupyterLab and fake-LLM fixtures of tests/ui/test_lab.py, shared with the sidebar tests."""

from tests.ui.test_lab import fake_llm, lab

__all__ = ["fake_llm", "lab"]
