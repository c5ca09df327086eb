"""``%tutor solve`` in a real kernel: a turn like any other, with the plan on its tool cards, the
learner asked inside it (try or show), each step checked, and the static rendering keeping it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.e2e.kernel_driver import KernelDriver, shown_text
from tests.e2e.test_ask_user_kernel import answer_text, button, card_of, inside, update

pytestmark = pytest.mark.e2e


def call(name: str, args: dict[str, Any], call_id: str) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name, args, id=call_id)])


def test_a_solve_asks_the_learner_checks_each_step_and_stays_in_the_notebook(
    kernel: KernelDriver, fake_llm: FakeLLMServer
) -> None:
    plan = {"steps": [{"title": "Multiply 17 by 23", "check": "arithmetic"}]}
    offer = {
        "title": "Step 1: Multiply 17 by 23. Try it or see it?",
        "mode": "single",
        "options": [{"id": "try", "label": "I'll try"}, {"id": "show", "label": "Show me"}],
    }
    fake_llm.extend(
        [
            call("solve_plan", plan, "p1"),
            Reply(
                text="The plan: 1. Multiply.", tool_calls=[ToolCallSpec("ask_user", offer, id="a1")]
            ),
            call(
                "solve_check",
                {"step": 1, "expression": "17*23", "answer": "391", "asked": "a1"},
                "c1",
            ),
            Reply(text="17·23 = **391**."),
        ]
    )
    kernel.execute("%tutor solve What is 17*23?")
    card = card_of(kernel)
    update(kernel, inside(kernel, card, "RadioButtonsModel")[0], index=1)
    kernel.click(button(kernel, card, "dt-ask-submit"))
    kernel.wait_for(lambda: "17·23 = **391**." in answer_text(kernel))
    asked = [
        m for r in fake_llm.requests for m in r.body["messages"] if m.get("tool_call_id") == "a1"
    ]
    assert json.loads(asked[0]["content"])["selections"] == ["show"]
    assert fake_llm.requests[0].body["messages"][-1]["content"] == "What is 17*23?"
    # The final bundle (the saved notebook) keeps the plan as the gate left it.
    final = kernel.wait_for(
        lambda: [
            shown_text(m["content"]["data"])
            for m in kernel.iopub
            if m["header"]["msg_type"] == "update_display_data"
            and "391" in m["content"]["data"].get("text/html", "")
        ]
    )
    assert "☑ 1. Multiply 17 by 23" in final[-1]
