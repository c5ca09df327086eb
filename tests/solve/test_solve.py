"""Guided solving (issue 26): a solve is a turn like any other, with a plan the gate checks step
by step (arithmetic by the calculator, code by the sandbox) and a bounded replan: a failing step
replans once and goes on; a stuck one stops at the bound and says where."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.agent.events import ToolCallFinished, TurnStarted
from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.runtime.session import AskOptions, TutorSession
from deeptutor_jupyter.solve import MAX_REPLANS, PlannedStep, SolveError, SolveState
from deeptutor_jupyter.solve.tools import read_state
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.runtime.fake_model_env import use_fake_model

PLAN = {"steps": [{"title": "Multiply 17 by 23", "check": "arithmetic"},
                  {"title": "Add 9", "check": "arithmetic"}]}  # fmt: skip


def call(name: str, args: dict[str, Any], n: int) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name, args, id=f"{name}-{n}")])


def check(step: int, expression: str, answer: str, n: int) -> Reply:
    return call("solve_check", {"step": step, "expression": expression, "answer": answer}, n)


async def solve(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    replies: list[Reply],
    answer: Callable[[TutorSession], Awaitable[None]] | None = None,
) -> tuple[Any, list[ToolCallFinished], FakeLLMServer, list[Any]]:
    """A solve turn in-process; without ``answer`` it runs where no form can be shown (as in a
    terminal), so its steps need no offer."""
    with FakeLLMServer(replies) as server:
        use_fake_model(monkeypatch, tmp_path / "home", server.url)
        session = TutorSession("lesson.ipynb", resolve=lambda f: resolve_settings(flags=f))
        options = AskOptions(capability="solve", interactive=answer is not None)
        turn = session.ask("What is 17*23 + 9?", session.resolve({}), options)
        events: list[Any] = []  # a finished turn's log lets go of them once saved
        turn.log.subscribe(events.append)
        assert turn.task is not None
        if answer is not None:
            await answer(session)
        await asyncio.wait_for(turn.task, 30)
        for model in session.models.values():
            await model.aclose()
        session.close()
    results = [e.body for e in events if isinstance(e.body, ToolCallFinished)]
    return turn, results, server, events


async def test_a_failing_step_replans_once_and_the_solve_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replan = {"reason": "17*23 is 391", "steps": PLAN["steps"]}
    turn, results, server, events = await solve(
        tmp_path,
        monkeypatch,
        [
            call("solve_plan", PLAN, 1),
            check(2, "381+9", "390", 1),  # out of order: refused
            check(1, "17*23", "381", 2),  # an arithmetic slip: the calculator catches it
            check(1, "17*23", "391", 3),  # refused: a failed plan must be replanned first
            call("solve_replan", replan, 1),
            check(1, "17*23", "391", 4),
            check(2, "391+9", "400", 5),
            Reply(text="17·23 + 9 = **400**: 17·23 = 391, then + 9."),
        ],
    )
    assert turn.status == "done" and "400" in turn.answer
    words = [(r.name, r.is_error, r.content.splitlines()[0]) for r in results]
    assert words == [
        ("solve_plan", False, "Plan committed: 2 steps."),
        ("solve_check", True, "Step 1 comes first: steps are checked in order."),
        (
            "solve_check",
            True,
            "Step 1 failed its check: 17*23 = 391, not 381. Call solve_replan "
            f"({MAX_REPLANS} of {MAX_REPLANS} replans left).",
        ),
        ("solve_check", True, "Step 1 failed its check; call solve_replan before checking again."),
        ("solve_replan", False, f"Replanned (1 of {MAX_REPLANS} replans used): 17*23 is 391"),
        ("solve_check", False, "Step 1 checked: 17*23 = 391."),
        ("solve_check", False, "Step 2 checked: 391+9 = 400. Every step is done."),
    ]
    # The learner sees the plan on the tool cards as it stands.
    assert results[-1].summary.endswith("☑ 1. Multiply 17 by 23 · ☑ 2. Add 9")
    state = read_state(tmp_path / "home", turn.turn_id)
    assert state is not None and state.status == "solved" and state.replans == 1
    assert state.reasons == ["17*23 is 391"]
    # A turn like any other: its capability, the solve tools only in it, the instructions.
    started = events[0].body
    assert isinstance(started, TurnStarted) and started.capability == "solve"
    sent = server.requests[0].body
    names = [t["function"]["name"] for t in sent["tools"]]
    assert {"solve_plan", "solve_check", "solve_replan", "ask_user", "calculate"} <= set(names)
    assert "guided solve" in sent["messages"][0]["content"]


async def test_where_forms_reach_the_learner_a_step_is_checked_only_after_it_was_offered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offer = {
        "title": "Step 1: Multiply 17 by 23. Try it or see it?",
        "mode": "single",
        "options": [{"id": "try", "label": "I'll try"}, {"id": "show", "label": "Show me"}],
        "allowCustom": True,
    }
    other = {**offer, "title": "Step 2: Add 9. Try it or see it?", "options": offer["options"]}
    replies = [
        call("solve_plan", PLAN, 1),
        check(1, "17*23", "391", 1),  # not offered yet: refused
        call("ask_user", other, 1),  # names another step
        call(
            "solve_check",
            {"step": 1, "expression": "17*23", "answer": "391", "asked": "ask_user-1"},
            2,
        ),
        call("ask_user", offer, 2),
        call(
            "solve_check",
            {"step": 1, "expression": "17*23", "answer": "391", "asked": "ask_user-2"},
            3,
        ),
        Reply(text="Your 391 is right."),
    ]

    async def answer(session: TutorSession) -> None:
        for _ in range(2):  # the learner answers each offer: the second with an attempt

            async def waiting() -> list[Any]:
                while not (rows := session.pending()):
                    await asyncio.sleep(0.01)
                return rows

            (row,) = await asyncio.wait_for(waiting(), 10)
            session.submit(row.session_id, row.request_id, ["try"], "391")

    _, results, _, _ = await solve(tmp_path, monkeypatch, replies, answer)
    checks = [(r.is_error, r.content.splitlines()[0]) for r in results if r.name == "solve_check"]
    assert checks[0][0] and checks[0][1].startswith("Offer step 1 to the learner first")
    assert checks[1][0] and checks[1][1].startswith("That ask_user does not name step 1.")
    assert checks[2] == (False, "Step 1 checked: 17*23 = 391.")


async def test_a_stuck_solve_stops_at_the_bound_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = {"steps": [{"title": "Find x", "check": "arithmetic"}]}
    replan = {"reason": "try again", "steps": one["steps"]}
    replies = [call("solve_plan", one, 1)]
    for n in range(MAX_REPLANS + 1):
        replies += [check(1, "2**10", "1000", n), call("solve_replan", replan, n)]
    replies += [check(1, "2**10", "1024", 99), Reply(text="I am stuck at step 1 (Find x).")]
    turn, results, _, _ = await solve(tmp_path, monkeypatch, replies)
    replans = [r for r in results if r.name == "solve_replan"]
    assert [r.is_error for r in replans] == [False] * MAX_REPLANS + [True]
    assert replans[-1].content.startswith(
        f"No replan left ({MAX_REPLANS} of {MAX_REPLANS} used): stuck at step 1 (Find x): "
        "2**10 = 1024, not 1000."
    )
    last = results[-1]  # nothing is checked once stuck, not even a right answer
    assert last.is_error and last.content.startswith("The solve is stuck at step 1 (Find x)")
    state = read_state(tmp_path / "home", turn.turn_id)
    assert state is not None and state.status == "stuck" and state.replans == MAX_REPLANS
    assert turn.status == "done" and "stuck at step 1" in turn.answer


async def test_a_code_step_is_run_in_the_sandbox(tmp_path: Path) -> None:
    from deeptutor_jupyter.learning.sandbox import isolation_available
    from deeptutor_jupyter.solve.tools import (
        SolveCheckArgs,
        SolveCheckTool,
        SolvePlanArgs,
        SolvePlanTool,
    )
    from deeptutor_jupyter.tools.base import ToolContext, ToolDeps

    if not isolation_available():
        pytest.skip("neither bubblewrap nor Landlock can run here")
    ctx = ToolContext("s", "turn-code", tmp_path, ToolDeps(home=tmp_path))
    plan = SolvePlanArgs(steps=[PlannedStep(title="Write square", check="code")])
    await SolvePlanTool().run(plan, ctx)
    tests = "assert square(3) == 9\n"  # run in the code's namespace
    wrong = SolveCheckArgs(step=1, code="def square(x):\n    return 2 * x\n", tests=tests)
    failed = await SolveCheckTool().run(wrong, ctx)
    assert failed.is_error and "failed its check" in failed.content, failed.content
    assert "A test failed (line 1 of the tests" in failed.content
    state = read_state(tmp_path, "turn-code")
    assert state is not None and state.steps[0].status == "failed"
    state.steps[0].status = "open"  # as a replan would leave it
    (tmp_path / "solve" / "turn-code.json").write_text(state.model_dump_json())
    right = SolveCheckArgs(step=1, code="def square(x):\n    return x * x\n", tests=tests)
    passed = await SolveCheckTool().run(right, ctx)
    assert not passed.is_error and "Every step is done" in passed.content, passed.content


def test_the_gate_is_plain_state() -> None:
    state = SolveState()
    with pytest.raises(SolveError, match="Commit a plan"):
        state.gate(1)
    state.commit([PlannedStep(title="a"), PlannedStep(title="b")])
    with pytest.raises(SolveError, match="already committed"):
        state.commit([PlannedStep(title="c")])
    with pytest.raises(SolveError, match="only after a step failed"):
        state.replan("why", [PlannedStep(title="c")])
    state.record(state.gate(1), True, "ok")
    state.record(state.gate(2), True, "ok")
    assert state.status == "solved"


def test_the_panel_solves_with_a_slash_command() -> None:
    from deeptutor_jupyter.kernel.comm import panel_capability

    assert panel_capability("/solve What is 17*23?") == ("solve", "What is 17*23?")
    assert panel_capability("/solve ") == ("chat", "/solve ")
    assert panel_capability("How do I /solve this?") == ("chat", "How do I /solve this?")
