"""The instructor's AI policy in a real kernel: ``off`` sends nothing to the model from
``%tutor``, ``%%tutor`` or the panel and says why; ``hints`` climbs a ladder per cell, withholds
code, and past the cap says so without a request (docs/policy.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.e2e.kernel_driver import KernelDriver, shown_text
from tests.e2e.test_sidebar_comm import Panel

pytestmark = pytest.mark.e2e

OFF = """---
policy:
  - mode: "off"
    reason: Midterm exam
    from: 2020-01-01T09:00:00+01:00
    until: 2099-12-10T11:00:00+01:00
  - mode: full
---
Be kind.
"""


def final_markdown(k: KernelDriver, msg_id: str, contains: str) -> str:
    """The bundle a finished turn leaves in the saved notebook (update_display_data)."""

    def found() -> str:
        for m in k.iopub:
            if m["header"]["msg_type"] != "update_display_data":
                continue
            md = shown_text(m["content"]["data"])
            if contains in md and "answering…" not in md:
                return md
        return ""

    return str(k.wait_for(found))


def badges(k: KernelDriver) -> list[str]:
    return [str(k.widgets[c]["value"]) for c in k.with_class("dt-policy")]


def test_off_sends_nothing_from_the_magics_and_the_panel_and_says_why(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    (tmp_path / "TUTOR.md").write_text(OFF, encoding="utf-8")
    fake_llm.add(Reply(text="must never be sent"))

    line = kernel.execute("%tutor What is the answer to question 2?")
    md = final_markdown(kernel, line, "Midterm exam")
    assert "The tutor is off: Midterm exam. It ends 2099-12-10T11:00+01:00." in md
    assert f"Tutor off — Midterm exam (from {tmp_path / 'TUTOR.md'})" in md  # the badge
    kernel.wait_for(lambda: any("Midterm exam" in b for b in badges(kernel)))

    cell = kernel.execute("%%tutor\nSolve this for me:\nx = ?")
    final_markdown(kernel, cell, "Solve this for me")

    panel = Panel(kernel)
    panel.wait(lambda: any(m["type"] == "turns" for m in panel.messages()))
    panel.send({"action": "ask", "question": "Just this once?", "conversation": None})
    panel.wait(lambda: panel.events("done"))
    errors = panel.events("error")
    assert errors and errors[0]["kind"] == "policy" and "Midterm exam" in errors[0]["message"]
    policy = [e for e in panel.events("notice") if e.get("stage") == "policy"]
    assert policy and str(tmp_path / "TUTOR.md") in policy[0]["text"]

    # What needs no model keeps working: the review cards.
    review = kernel.execute("%tutor review")
    assert "Nothing to review now" in json.dumps(kernel.outputs_of(review), default=str)

    assert fake_llm.requests == []  # nothing reached the model, from any surface


def test_a_malformed_policy_is_off_and_says_where(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    (tmp_path / "TUTOR.md").write_text("---\npolicy:\n  mode: hint\n---\n", encoding="utf-8")
    fake_llm.add(Reply(text="must never be sent"))
    msg = kernel.execute("%tutor Help?")
    md = final_markdown(kernel, msg, "cannot be read")
    assert f"{tmp_path / 'TUTOR.md'}, policy entry 1, 'mode'" in md
    assert fake_llm.requests == []


def _hints(tmp_path: Path, cap: int) -> None:
    text = f"---\npolicy:\n  - mode: hints\n    hints: {cap}\n---\n"
    (tmp_path / "TUTOR.md").write_text(text, encoding="utf-8")


def system_prompt(request: Any) -> str:
    return str(request.body["messages"][0]["content"])


def test_hints_ladder_withholds_code_and_stops_at_the_cap_without_a_request(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    _hints(tmp_path, 2)
    fake_llm.extend(
        [
            Reply(text="Look at the loop bounds.\n```python\nanswer = sum(range(10))\n```\nWhy?"),
            Reply(text="Here is a similar problem."),
        ]
    )
    first = kernel.execute("%tutor How do I solve exercise 1?", cell_id="ex1")
    md = final_markdown(kernel, first, "Look at the loop bounds.")
    assert "answer = sum" not in md and "Code withheld" in md
    assert "Hints only — 1 of 2 used" in md
    assert "This is hint 1 of 2" in system_prompt(fake_llm.requests[0])

    second = kernel.execute("%tutor Another hint please", cell_id="ex1")
    final_markdown(kernel, second, "similar problem")
    assert "This is hint 2 of 2" in system_prompt(fake_llm.requests[1])

    third = kernel.execute("%tutor Just give me the answer", cell_id="ex1")
    md = final_markdown(kernel, third, "used all 2 hints")
    assert "ask your instructor" in md
    assert len(fake_llm.requests) == 2  # the cap holds without asking the model

    fake_llm.add(Reply(text="A nudge for exercise 2."))
    other = kernel.execute("%tutor And exercise 2?", cell_id="ex2")
    final_markdown(kernel, other, "A nudge for exercise 2.")
    assert "This is hint 1 of 2" in system_prompt(fake_llm.requests[2])  # its own ladder


def test_tags_select_the_exercise_cells_of_the_saved_notebook(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    text = "---\npolicy:\n  - {mode: hints, tags: [exercise], hints: 1}\n  - mode: full\n---\n"
    (tmp_path / "TUTOR.md").write_text(text, encoding="utf-8")
    cells = [
        {"id": "ex1", "cell_type": "code", "metadata": {"tags": ["exercise"]}, "source": ""},
        {"id": "free", "cell_type": "code", "metadata": {}, "source": ""},
    ]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "lesson.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    fake_llm.extend([Reply(text="A nudge."), Reply(text="A full explanation.")])

    hinted = kernel.execute("%tutor Help with the exercise", cell_id="ex1")
    final_markdown(kernel, hinted, "A nudge.")
    assert "HINTS ONLY" in system_prompt(fake_llm.requests[0])

    free = kernel.execute("%tutor Explain loops", cell_id="free")
    md = final_markdown(kernel, free, "A full explanation.")
    assert "HINTS ONLY" not in system_prompt(fake_llm.requests[1])
    assert "Full help" in md


def test_a_refused_turn_starts_no_memory_upkeep(tmp_path: Path) -> None:
    """Memory consolidation asks the model too: an off window must not start it."""
    from deeptutor_jupyter.config import write_settings
    from tests.e2e.conftest import kernel_env
    from tests.e2e.test_upkeep_kernel import JOIN

    home = tmp_path / "home"
    write_settings({"auto_consolidate": True, "consolidate_every": 1}, home=home)
    (tmp_path / "TUTOR.md").write_text(OFF, encoding="utf-8")
    with FakeLLMServer([Reply(text="must never be sent")]) as server:
        k = KernelDriver(kernel_env(tmp_path, server, DEEPTUTOR_AUTO_CONSOLIDATE=""), tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter")
            final_markdown(k, k.execute("%tutor Help?"), "Midterm exam")
            k.execute(JOIN)
            assert server.requests == []
        finally:
            k.shutdown()


def test_an_answer_that_passes_the_exercises_hidden_tests_is_withheld(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    _hints(tmp_path, 3)
    tests = "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"
    exercise = {
        "id": "ex1",
        "cell_type": "code",
        "metadata": {"tags": ["exercise"], "deeptutor": {"hidden_tests": tests}},
        "source": "def add(a, b):\n    ...\n",
    }
    notebook = {"cells": [exercise], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "lesson.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    fake_llm.extend(
        [
            Reply(text="Full solution:\n```python\ndef add(a, b):\n    return a + b\n```\n"),
            Reply(text="Which operator combines two numbers?"),
            Reply(text="Compare your sign:\n```python\nreturn a - b\n```\nWhat does it give?"),
        ]
    )
    solved = kernel.execute("%tutor Solve it for me", cell_id="ex1")
    md = final_markdown(kernel, solved, "Which operator")
    assert "Full solution" not in md and "return a + b" not in md
    assert "passes this exercise's hidden tests" in md
    assert "This is hint 2 of 3" in str(fake_llm.requests[1].body["messages"][-1]["content"])

    nudge = kernel.execute("%tutor Another hint?", cell_id="ex1")
    md = final_markdown(kernel, nudge, "Compare your sign")
    assert "What does it give?" in md and "passes this exercise" not in md
    assert len(fake_llm.requests) == 3
