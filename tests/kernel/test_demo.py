"""``%tutor demo``: a scripted stand-in that says so, on a scratch home, and off restores."""

from __future__ import annotations

import os

import pytest

from deeptutor_jupyter.kernel.demo import ANNOUNCE, NOTE, OFF, SCRIPT, Demo
from deeptutor_jupyter.providers import ChatRequest, TextDelta, make_model


async def ask(url: str, question: str) -> str:
    model = make_model(provider="custom", model="scripted-demo", base_url=url, api_key="demo")
    request = ChatRequest(model="scripted-demo", messages=[{"role": "user", "content": question}])
    try:
        return "".join([e.text async for e in model.stream(request) if isinstance(e, TextDelta)])
    finally:
        await model.aclose()


async def test_demo_points_the_tutor_at_the_stand_in_and_off_restores(
    monkeypatch: pytest.MonkeyPatch, tmp_path
):
    monkeypatch.setenv("DEEPTUTOR_API_KEY", "sk-the-learners-own")
    monkeypatch.setenv("DEEPTUTOR_HOME", str(tmp_path / "mine"))
    monkeypatch.delenv("DEEPTUTOR_BASE_URL", raising=False)
    demo = Demo()
    assert "not a real model" in demo.start() == ANNOUNCE
    try:
        assert os.environ["DEEPTUTOR_PROVIDER"] == "custom"
        assert os.environ["DEEPTUTOR_API_KEY"] == "demo"  # the real key is not sent to it
        assert os.environ["DEEPTUTOR_HOME"] != str(tmp_path / "mine")
        url = os.environ["DEEPTUTOR_BASE_URL"]
        first = await ask(url, "anything at all")
        assert first.startswith(NOTE) and "eigenvector" in first
        for _ in SCRIPT[1:]:
            await ask(url, "next")
        used_up = await ask(url, "my own question")
        assert used_up.startswith(NOTE) and "%tutor demo off" in used_up
        assert await ask(url, "again") == used_up  # never an error, however many are asked
    finally:
        assert demo.stop() == OFF
    assert os.environ["DEEPTUTOR_API_KEY"] == "sk-the-learners-own"
    assert os.environ["DEEPTUTOR_HOME"] == str(tmp_path / "mine")
    assert "DEEPTUTOR_BASE_URL" not in os.environ
    assert demo.stop() == "Demo mode is not on."
