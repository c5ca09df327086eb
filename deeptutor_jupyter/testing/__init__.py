"""Test doubles that ship with the package, so users can test notebooks without a network."""

from deeptutor_jupyter.testing import faults
from deeptutor_jupyter.testing._script import NO_REPLY_LEFT, RecordedRequest
from deeptutor_jupyter.testing.fake_llm import FakeLLMServer, Reply, ToolCallSpec

__all__ = [
    "NO_REPLY_LEFT",
    "FakeLLMServer",
    "RecordedRequest",
    "Reply",
    "ToolCallSpec",
    "faults",
]
