"""A long conversation is summarised (runtime/compaction.py) and the kernel says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deeptutor_jupyter.messages import Message
from deeptutor_jupyter.runtime.compaction import SUMMARY_PREFIX, compact_history, estimate_tokens
from deeptutor_jupyter.testing import FakeLLMServer, Reply


def conversation(turns: int, start: int = 0) -> list[Message]:
    history: list[Message] = []
    for i in range(start, start + turns):
        history.append({"role": "user", "content": f"Question {i}: what about matrix {i}?"})
        if i % 10 == 3:  # a turn that asked the learner something
            call = {
                "id": f"ask{i}",
                "type": "function",
                "function": {"name": "ask_user", "arguments": "{}"},
            }
            history.append({"role": "assistant", "content": "", "tool_calls": [call]})  # type: ignore[typeddict-item]
            history.append(
                {
                    "role": "tool",
                    "tool_call_id": f"ask{i}",
                    "content": f'{{"selections": ["level{i}"]}}',
                }
            )
        ending = "Which case do you want next?" if i % 10 == 7 else "That is the answer."
        history.append(
            {"role": "assistant", "content": f"Answer {i}. " + "Details. " * 40 + ending}
        )
    return history


def test_a_history_within_budget_is_left_as_it_is() -> None:
    history = conversation(3)
    same, compaction = compact_history(history, budget_tokens=100_000)
    assert same is history and compaction is None


def test_a_history_exactly_at_the_budget_is_kept_and_one_token_over_is_compacted() -> None:
    history = conversation(6)
    size = estimate_tokens(history)
    same, compaction = compact_history(history, budget_tokens=size)
    assert same is history and compaction is None
    compacted, compaction = compact_history(history, budget_tokens=size - 1)
    assert compaction is not None and compaction.replaced_turns >= 2
    assert compacted[0]["content"].startswith(SUMMARY_PREFIX)  # type: ignore[union-attr]


def test_only_a_history_longer_than_the_recent_turns_is_compacted() -> None:
    over = 10  # tokens: far over budget either way; only the number of turns decides
    four = conversation(4)
    same, compaction = compact_history(four, budget_tokens=over, keep_turns=4)
    assert same is four and compaction is None
    five = conversation(5)
    compacted, compaction = compact_history(five, budget_tokens=over, keep_turns=4)
    assert compaction is not None and compaction.replaced_turns >= 1
    assert compacted[0]["content"].startswith(SUMMARY_PREFIX)  # type: ignore[union-attr]


def test_recent_turns_that_fill_exactly_half_the_budget_are_all_kept() -> None:
    history = conversation(8)
    starts = [i for i, m in enumerate(history) if m["role"] == "user"]
    recent = history[starts[-4] :]
    half = estimate_tokens(recent)
    compacted, compaction = compact_history(history, budget_tokens=2 * half)
    assert compaction is not None and compacted[2:] == recent  # all four recent turns
    compacted, compaction = compact_history(history, budget_tokens=2 * half - 2)
    assert compaction is not None and compacted[2:] == history[starts[-3] :]  # one fewer


def test_older_turns_become_a_summary_that_keeps_what_matters() -> None:
    history = conversation(200)
    compacted, compaction = compact_history(history, budget_tokens=4000)
    assert compaction is not None and compaction.replaced_turns == 196
    assert estimate_tokens(compacted) < estimate_tokens(history) / 5
    assert compacted[-len(history[-8:]) :] == history[-8:]  # recent turns verbatim
    summary = str(compacted[0]["content"])
    assert summary.startswith(SUMMARY_PREFIX) and "196 turns" in summary  # provenance
    assert "Question 195: what about matrix 195?" in summary  # the learner's recent questions
    assert len(summary) <= 4000 * 4 // 2  # the summary itself keeps within half the budget
    assert "older lines left out" in summary  # and says what it left out
    assert '"selections": ["level13"]' in summary  # the learner's answers to ask_user
    assert "Open question from the tutor" in summary and "Which case do you want next?" in summary
    assert "196 turns" in compaction.notice


def test_compacting_again_carries_the_earlier_summary() -> None:
    first, _ = compact_history(conversation(100), budget_tokens=4000)
    longer = first + conversation(100, start=100)
    again, compaction = compact_history(longer, budget_tokens=8000)
    assert compaction is not None
    summary = str(again[0]["content"])
    assert '"selections": ["level13"]' in summary  # carried over from the first summary
    assert "Question 195" in summary
    assert summary.count(SUMMARY_PREFIX) == 1 and "196 turns" in summary


@pytest.mark.e2e
def test_a_long_session_in_a_kernel_sends_bounded_requests_and_says_so(tmp_path: Path) -> None:
    from tests.e2e.kernel_driver import KernelDriver, kernel_env

    long_answer = "This explanation is long. " * 80
    with FakeLLMServer() as server:
        server.extend([Reply(text=long_answer) for _ in range(12)])
        env = kernel_env(tmp_path, server, DEEPTUTOR_CONTEXT_BUDGET="1500")
        k = KernelDriver(env, cwd=tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter\nimport deeptutor_jupyter")
            for i in range(12):
                k.execute(f"%tutor question {i}")
                k.execute("await deeptutor_jupyter.wait_for_turns()")
            statuses = [str(k.widgets[c].get("value", "")) for c in k.with_class("dt-status")]
        finally:
            k.shutdown()
        sizes = [len(json.dumps(r.body["messages"])) for r in server.requests]
        last = server.requests[-1].body["messages"]
    assert any("earlier turns summarised" in s for s in statuses)
    assert any(str(m.get("content", "")).startswith(SUMMARY_PREFIX) for m in last)
    assert "question 0" in json.dumps(last)  # the first question survives in the summary
    assert max(sizes[6:]) < 2 * 1500 * 4  # bounded, while the full history would keep growing
    assert last[-1] == {"role": "user", "content": "question 11"}
