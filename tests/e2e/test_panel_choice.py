"""The panel's model and knowledge-base chooser over the comm of a real kernel (kernel/choose.py):
what it is offered holds names only, a choice the kernel does not offer is refused in words (as a
student crafting comm messages would send it), and the next turn's request uses the choice."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.knowledge import KnowledgeBase
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.e2e.kernel_driver import SECRET, KernelDriver, kernel_env, loaded_kernel
from tests.e2e.test_sidebar_comm import Panel

pytestmark = pytest.mark.e2e


@pytest.fixture
def kernel(tmp_path: Path, fake_llm: FakeLLMServer) -> Iterator[KernelDriver]:
    env = kernel_env(tmp_path, fake_llm, DEEPTUTOR_MODELS="fake-big")
    with loaded_kernel(env, tmp_path) as driver:
        yield driver


def choices(panel: Panel) -> list[dict[str, Any]]:
    return [m for m in panel.messages() if m["type"] == "choices"]


def test_a_model_and_knowledge_base_chosen_in_the_panel_serve_the_next_turn(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Rank\n\nThe rank counts pivots.\n", encoding="utf-8")
    KnowledgeBase(tmp_path / "home", "linalg").add_sources([notes])
    panel = Panel(kernel)
    offered = panel.wait(lambda: choices(panel))[0]
    assert offered["models"] == ["fake-model", "fake-big"]
    assert (offered["default_model"], offered["kbs"]) == ("fake-model", ["linalg"])
    wire = json.dumps(panel.messages())
    assert SECRET not in wire and fake_llm.url not in wire  # names only, never a key or URL
    conversation = offered["session_id"]

    refused = [
        ({"model": "gpt-5"}, "choice", "'gpt-5' is not one you can use here"),
        ({"kbs": ["physics"]}, "choice", "No knowledge base named physics"),
        ({"model": "m" * 201}, "invalid", "Bad choose message: model"),
        ({"kbs": ["linalg"] * 11}, "invalid", "Bad choose message: kbs"),
        ({"conversation": "nb-someone-else"}, "choice", "No such conversation"),
    ]
    for n, (fields, code, words) in enumerate(refused, start=1):
        panel.send({"action": "choose", "conversation": conversation, **fields})
        error = panel.wait(lambda n=n: panel.errors()[n - 1 :])[0]
        assert (error["action"], error["code"]) == ("choose", code)
        assert words in error["message"]
    assert len(choices(panel)) == 1  # nothing was chosen

    choose = {"conversation": conversation, "model": "fake-big", "kbs": ["linalg"]}
    panel.send({"action": "choose", **choose})
    chosen = panel.wait(lambda: choices(panel)[1:])[0]
    assert chosen["choice"] == {"model": "fake-big", "kbs": ["linalg"]}

    KnowledgeBase(tmp_path / "home", "calculus").add_sources([notes])
    fake_llm.extend([Reply(text="It counts pivots.")])
    panel.send({"action": "ask", "question": "What is rank?", "conversation": None})
    panel.wait(lambda: panel.events("done"))
    # When the turn ends the lists are sent again: a knowledge base made meanwhile is offered.
    after = panel.wait(lambda: choices(panel)[2:])[0]
    assert after["kbs"] == ["calculus", "linalg"] and after["choice"] == chosen["choice"]
    assert fake_llm.requests[-1].body["model"] == "fake-big"
    started = panel.events("turn_started")[0]
    assert started["model"].endswith("fake-big") and started["kbs"] == ["linalg"]
