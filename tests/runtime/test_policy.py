"""The instructor's AI policy (learning/policy.py): parsing, windows, tags, the stricter reading
of a malformed policy, and the kernel-side gate (runtime/policy_gate.py)."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest

from deeptutor_jupyter.learning.policy import decide, find_policy, read_policy
from deeptutor_jupyter.providers.base import (
    ChatRequest,
    Compat,
    ProviderError,
    RoundEnd,
    TextDelta,
    ThinkingDelta,
)
from deeptutor_jupyter.runtime.policy_gate import (
    WITHHELD,
    CodeFilter,
    HintLedger,
    HintsOnlyModel,
    PolicyGate,
    PolicyGuard,
    RefusingModel,
    code_blocks,
)

EXAM = """---
policy:
  - mode: "off"
    reason: Midterm exam
    from: 2026-12-10T09:00:00+01:00
    until: 2026-12-10T11:00:00+01:00
  - mode: hints
    tags: [exercise]
    hints: 2
  - mode: full
---
# Linear algebra
"""
CET = dt.timezone(dt.timedelta(hours=1))


def write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "TUTOR.md").write_text(text, encoding="utf-8")
    return folder / "TUTOR.md"


def at(hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 12, 10, hour, minute, tzinfo=CET)


def test_the_first_entry_that_applies_now_wins(tmp_path: Path) -> None:
    source = read_policy(write(tmp_path, EXAM))
    during = decide(source, at(10), tags=["exercise"])
    assert (during.mode, during.reason) == ("off", "Midterm exam")
    assert during.until == at(11)
    assert during.source == str(tmp_path / "TUTOR.md")
    # from is inclusive, until is exclusive
    assert decide(source, at(9)).mode == "off"
    assert decide(source, at(11), tags=["exercise"]).mode == "hints"


def test_a_window_that_ended_or_has_not_begun_does_not_apply(tmp_path: Path) -> None:
    source = read_policy(write(tmp_path, EXAM))
    assert decide(source, at(8, 59)).mode == "full"
    assert decide(source, at(11, 0)).mode == "full"


def test_tags_select_exercise_cells(tmp_path: Path) -> None:
    source = read_policy(write(tmp_path, EXAM))
    exercise = decide(source, at(12), tags=["exercise", "week3"])
    assert (exercise.mode, exercise.hints) == ("hints", 2)
    assert decide(source, at(12), tags=["notes"]).mode == "full"
    assert decide(source, at(12)).mode == "full"


def test_one_mapping_and_yaml_unquoted_off(tmp_path: Path) -> None:
    source = read_policy(write(tmp_path, "---\npolicy:\n  mode: off\n  reason: Quiz day\n---\n"))
    decision = decide(source)
    assert (decision.mode, decision.reason) == ("off", "Quiz day")
    hints = read_policy(write(tmp_path / "b", "---\npolicy: {mode: hints}\n---\n"))
    assert decide(hints).hints == 3  # the default ladder


def test_nearest_folder_wins_then_the_course_packs(tmp_path: Path) -> None:
    write(tmp_path / "course", EXAM)
    near = write(tmp_path / "course" / "lab1", "---\npolicy: {mode: full}\n---\n")
    assert find_policy(tmp_path / "course" / "lab1" / "deep").path == str(near)  # type: ignore[union-attr]
    # A TUTOR.md without a policy does not hide the course folder's.
    write(tmp_path / "course" / "lab2", "---\ntitle: Lab 2\n---\nBe kind.\n")
    found = find_policy(tmp_path / "course" / "lab2")
    assert found is not None and found.path == str(tmp_path / "course" / "TUTOR.md")
    pack = write(tmp_path / "pack", "---\npolicy: {mode: hints, hints: 1}\n---\n")
    assert find_policy(tmp_path / "elsewhere", [pack]).path == str(pack)  # type: ignore[union-attr]
    assert find_policy(tmp_path / "elsewhere") is None
    assert decide(None).mode == "full"


@pytest.mark.parametrize(
    ("front", "said"),
    [
        ("policy:\n  - mode: nothing\n", "policy entry 1, 'mode'"),
        ("policy:\n  - mode: hints\n    hints: many\n", "policy entry 1, 'hints'"),
        (
            "policy:\n  - mode: full\n  - mode: 'off'\n    from: 2026-12-10T09:00\n",
            "entry 2, 'from'",
        ),
        ("policy:\n  - mode: full\n    color: red\n", "'color'"),
        (
            "policy:\n  - mode: 'off'\n    from: 2026-12-10T11:00Z\n    until: 2026-12-10T09:00Z\n",
            "'until' is not after 'from'",
        ),
        ("policy: [mode: hints\n", "line"),  # YAML that does not parse: where it failed
        ("policy: []\n", "no entries"),
        ("policy:\n  - just words\n", "entry 1"),
    ],
)
def test_a_malformed_policy_reads_as_off_and_says_what_and_where(
    tmp_path: Path, front: str, said: str
) -> None:
    path = write(tmp_path, f"---\n{front}---\nBody\n")
    decision = decide(read_policy(path), at(12), tags=["exercise"])
    assert decision.mode == "off"  # the stricter reading, never full
    assert said in decision.error and str(path) in decision.error
    assert str(path) in decision.refusal()


def test_broken_front_matter_that_names_no_policy_is_not_a_policy(tmp_path: Path) -> None:
    assert read_policy(write(tmp_path, "---\ntitle: [unclosed\n---\n")) is None
    assert read_policy(write(tmp_path / "b", "# Just instructions\n")) is None


def test_code_blocks_are_withheld_from_a_streamed_answer() -> None:
    code = CodeFilter()
    chunks = [
        "Look at the loop.\n``",
        "`python\nfor i in range(3):\n",
        "    total += i\n```\n",
        "What does `total` hold?",
    ]
    out = "".join(code.feed(c) for c in chunks) + code.flush()
    assert "range" not in out and "total +=" not in out
    assert out == f"Look at the loop.\n{WITHHELD}What does `total` hold?"


class Scripted:
    provider, model = "custom", "fake"

    def __init__(self, *texts: str) -> None:
        self.texts, self.compat, self.asked = texts, Compat(), 0

    async def stream(self, request: ChatRequest):  # type: ignore[no-untyped-def]
        self.asked += 1
        for text in self.texts:
            yield TextDelta(text)
        yield RoundEnd("stop")

    async def aclose(self) -> None:
        return None


async def _said(model: object) -> str:
    out = []
    async for event in model.stream(ChatRequest("m", [])):  # type: ignore[attr-defined]
        if isinstance(event, TextDelta):
            out.append(event.text)
    return "".join(out)


def test_hints_model_withholds_code_and_refusing_model_asks_nothing() -> None:
    inner = Scripted("Try this:\n~~~\nanswer = 42\n~~~\nDone")
    assert asyncio.run(_said(HintsOnlyModel(inner))) == f"Try this:\n{WITHHELD}Done"
    never = Scripted("x")
    with pytest.raises(ProviderError) as refused:
        asyncio.run(_said(RefusingModel(("custom", "fake"), "The tutor is off: exam.")))
    assert refused.value.kind == "policy" and never.asked == 0


def test_the_ladder_counts_per_notebook_and_cell_and_caps(tmp_path: Path) -> None:
    ledger = HintLedger(tmp_path / "state.db")
    assert [ledger.take("nb", "c1", 2) for _ in range(3)] == [1, 2, None]
    assert ledger.take("nb", "c2", 2) == 1  # another exercise has its own ladder
    assert ledger.take("other", "c1", 2) == 1
    ledger.close()
    assert HintLedger(tmp_path / "state.db").used("nb", "c1") == 2  # kept in the store


def test_the_gate_turns_the_decision_into_the_turns_model(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    write(tmp_path / "w", "---\npolicy: {mode: hints, hints: 1}\n---\n")
    gate, real = PolicyGate(), Scripted("ok")
    decision = gate.gate(home, tmp_path / "w", ())
    first = gate.apply(decision, real, home, "nb", "c1", tmp_path / "w")
    assert isinstance(first.model.inner, HintsOnlyModel) and "hint 1 of 1" in first.blocks[0]
    assert first.badge == f"Hints only — 1 of 1 used (from {tmp_path / 'w' / 'TUTOR.md'})"
    second = gate.apply(decision, real, home, "nb", "c1", tmp_path / "w")
    assert isinstance(second.model, RefusingModel) and "all 1 hints" in second.model.message
    assert second.payload()["used"] == 1


def test_a_turn_that_waited_into_an_off_window_stops_before_its_next_round(
    tmp_path: Path,
) -> None:
    home, work = tmp_path / "home", tmp_path / "w"
    home.mkdir()
    write(work, "---\npolicy: {mode: full}\n---\n")
    gate, real = PolicyGate(), Scripted("round")
    turn = gate.apply(gate.gate(home, work, ()), real, home, "nb", "c1", work)
    assert isinstance(turn.model, PolicyGuard)
    assert asyncio.run(_said(turn.model)) == "round"
    # The learner answers a form after the exam began: the next round asks nothing.
    write(work, "---\npolicy: {mode: 'off', reason: Exam now}\n---\n")
    with pytest.raises(ProviderError) as refused:
        asyncio.run(_said(turn.model))
    assert "Exam now" in refused.value.message and real.asked == 1


TESTS = "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"


class Replies(Scripted):
    """One scripted answer per request, and the requests it got."""

    def __init__(self, *answers: str) -> None:
        super().__init__()
        self.answers, self.requests = list(answers), []  # type: list[str], list[ChatRequest]

    async def stream(self, request: ChatRequest):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        yield TextDelta(self.answers.pop(0))
        yield RoundEnd("stop")


def _exercise_turn(tmp_path: Path, real: object, cap: int = 3):  # type: ignore[no-untyped-def]
    from deeptutor_jupyter.learning.sandbox import Sandbox

    home, work = tmp_path / "home", tmp_path / "w"
    home.mkdir(parents=True)
    write(work, f"---\npolicy: {{mode: hints, hints: {cap}}}\n---\n")
    gate = PolicyGate(sandbox=Sandbox(mode="unsafe"))
    decision = gate.gate(home, work, ())
    return gate, gate.apply(decision, real, home, "nb", "ex1", work, (), TESTS)


def test_an_answer_that_passes_the_hidden_tests_is_replaced_by_the_next_hint(
    tmp_path: Path,
) -> None:
    solution = "Here is the whole solution:\n```python\ndef add(a, b):\n    return a + b\n```\n"
    real = Replies(solution, "Hint: what does `+` do with two numbers?")
    gate, turn = _exercise_turn(tmp_path, real)
    said = asyncio.run(_said(turn.model))
    assert "whole solution" not in said and "return a + b" not in said
    assert "passes this exercise's hidden tests" in said and "*Hint 2 of 3 instead:*" in said
    assert said.endswith("Hint: what does `+` do with two numbers?")
    # The replacement is the next rung, counted in the ledger, asked without tools.
    retry = real.requests[1]
    assert "This is hint 2 of 3" in str(retry.messages[-1]["content"]) and retry.tools is None
    assert gate.ledger(tmp_path / "home").used("nb", "ex1") == 2


def test_an_answer_that_does_not_pass_is_shown_and_past_the_cap_none_is_asked(
    tmp_path: Path,
) -> None:
    nudge = "Look at the return line:\n```python\ndef add(a, b):\n    return a - b\n```\nWhy?"
    real = Replies(nudge)
    _gate, turn = _exercise_turn(tmp_path / "a", real)
    assert asyncio.run(_said(turn.model)) == f"Look at the return line:\n{WITHHELD}Why?"
    assert len(real.requests) == 1
    # The last hint solves it: withheld, and no next hint is asked for past the cap.
    insists = Replies("Fine:\n```\ndef add(a, b): return a + b\n```")
    _gate, last = _exercise_turn(tmp_path / "b", insists, cap=1)
    said = asyncio.run(_said(last.model))
    assert "return a + b" not in said and "Fine" not in said
    assert "used all 1 hints" in said and len(insists.requests) == 1

    # An unclosed fence is a block to the end (CodeFilter withholds it to the end as well).
    assert code_blocks("Try:\n~~~py\nx = 1\n~~~\nand\n```\ny = 2\n") == ["x = 1\n", "y = 2\n"]


def test_the_exercise_is_named_to_the_course_service_only(tmp_path: Path) -> None:
    """The hints cap at the gateway counts per exercise (hub/hints.py): the kernel names it in a
    header to the course's service, and to no other endpoint."""
    from deeptutor_jupyter.providers import make_model
    from deeptutor_jupyter.testing import FakeLLMServer, Reply

    async def ask(provider: str, url: str) -> None:
        model = make_model(provider=provider, model="fake", base_url=url, api_key="k")
        gate = PolicyGate()
        turn = gate.apply(
            gate.gate(tmp_path, tmp_path, ()), model, tmp_path, "/h/w/l.ipynb", "c1", tmp_path
        )
        try:
            await _said(turn.model)
        finally:
            await model.aclose()

    with FakeLLMServer([Reply(text="a"), Reply(text="b")]) as server:
        asyncio.run(ask("hub", server.url))
        asyncio.run(ask("openai-compatible", server.url))
        hub, other = (r.headers for r in server.requests)
    assert hub["x-deeptutor-exercise"] == "l.ipynb#c1"
    assert "x-deeptutor-exercise" not in other


def test_code_in_the_models_reasoning_is_withheld_too() -> None:
    """Reasoning on its own channel (reasoning_content) is shown in the cell as thinking."""

    class Reasoning(Scripted):
        async def stream(self, request: ChatRequest):  # type: ignore[no-untyped-def]
            yield ThinkingDelta("Solve it:\n```py\nanswer = 4")
            yield ThinkingDelta("2\n```\nthen hint.")
            yield TextDelta("A nudge.")
            yield RoundEnd("stop")

    async def thoughts() -> str:
        out = []
        async for event in HintsOnlyModel(Reasoning()).stream(ChatRequest("m", [])):
            if isinstance(event, ThinkingDelta):
                out.append(event.text)
        return "".join(out)

    assert asyncio.run(thoughts()) == f"Solve it:\n{WITHHELD}then hint."
