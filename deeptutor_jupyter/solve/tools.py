"""The solve tools: ``solve_plan`` commits a plan, ``solve_check`` is the gate of each step
(arithmetic by the calculator, code by the sandbox), ``solve_replan`` changes the plan after a
failed check, at most ``MAX_REPLANS`` times. Each result's summary shows the plan as it stands,
so the learner sees it on the tool cards live and in the saved notebook.

A solve's state lives in ``$DEEPTUTOR_HOME/solve/<turn id>.json`` (written atomically under a
lock): a solve paused on a question and resumed by another process goes on where it was.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from deeptutor_jupyter import _files
from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.solve import MAX_STEPS, PlannedStep, SolveError, SolveState, numbers_agree
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult

INSTRUCTIONS = """\
This is a guided solve of the learner's problem. Work with the solve tools:
1. Call solve_plan once with the steps (short titles; check 'arithmetic' for a calculation,
   'code' for code, 'reasoning' otherwise). Show the learner the plan, titles only.
2. For each step in order: offer it to the learner with ask_user (title "Step N: <title>",
   options 'try' and 'show', free text allowed for their attempt). Reveal the step's work when
   they chose to see it, or after their attempt (say what was right in it). Then call
   solve_check for that step with the id of that ask_user call as asked: for arithmetic give
   the expression and the number you claim; for code give the code and tests with asserts.
3. When a check fails, call solve_replan with the reason and the new remaining steps.
   When solve_replan says no replan is left, stop: tell the learner at which step you are
   stuck and what you tried, and give no final answer.
4. When every step is done, give the answer with a short recap of the steps."""


def state_path(home: Path, turn_id: str) -> Path:
    return home / "solve" / f"{turn_id}.json"


@contextlib.contextmanager
def solve_state(ctx: ToolContext) -> Iterator[SolveState]:
    """The turn's solve state, saved again when the block ends without an error."""
    if ctx.deps.home is None:
        raise SolveError("Solving needs the learner's home to keep its plan.")
    path = state_path(ctx.deps.home, ctx.turn_id)
    _files.ensure_private_dir(path.parent)
    with _files.locked(path.with_suffix(".lock")):
        state = (
            SolveState.model_validate_json(path.read_text(encoding="utf-8"))
            if path.exists()
            else SolveState()
        )
        yield state
        _files.atomic_write_text(path, state.model_dump_json())


def read_state(home: Path, turn_id: str) -> SolveState | None:
    path = state_path(home, turn_id)
    if not path.exists():
        return None
    return SolveState.model_validate_json(path.read_text(encoding="utf-8"))


def _result(state: SolveState, words: str, *, error: bool = False) -> ToolResult:
    plan = state.markdown()
    return ToolResult(
        content=f"{words}\n\nPlan:\n{plan}" if plan else words,
        is_error=error,
        summary=f"{words.splitlines()[0]} · " + " · ".join(plan.splitlines()),
        data={"solve": state.model_dump()},
    )


class SolvePlanArgs(LazyModel):
    steps: list[PlannedStep] = Field(min_length=1, max_length=MAX_STEPS)


class SolvePlanTool(Tool[SolvePlanArgs]):
    name: ClassVar[str] = "solve_plan"
    description: ClassVar[str] = (
        "Commit the plan of this solve: its steps in order, each with how it is checked. "
        "Called once; change it later only with solve_replan."
    )
    Args: ClassVar[type[BaseModel]] = SolvePlanArgs

    async def run(self, args: SolvePlanArgs, ctx: ToolContext) -> ToolResult:
        try:
            with solve_state(ctx) as state:
                state.commit(args.steps)
        except SolveError as exc:
            return ToolResult(content=str(exc), is_error=True, summary=str(exc))
        return _result(state, f"Plan committed: {len(state.steps)} steps.")


class SolveCheckArgs(LazyModel):
    step: int = Field(ge=1, description="The step's number (1 is the first).")
    answer: str = Field("", description="For arithmetic: the number you claim for the step.")
    expression: str = Field("", description="For arithmetic: the calculation, e.g. '17*23'.")
    code: str = Field("", description="For code: the step's code.")
    tests: str = Field("", description="For code: Python asserts the code must pass.")
    asked: str = Field(
        "",
        description="The id of your ask_user call that offered this step to the learner "
        "(its title naming 'Step N'; they chose to try it or to see it).",
    )


class SolveCheckTool(Tool[SolveCheckArgs]):
    name: ClassVar[str] = "solve_check"
    description: ClassVar[str] = (
        "Check the current step before going on: arithmetic is computed exactly and compared "
        "with your answer, code is run with its tests in a sandbox. Steps are checked in order."
    )
    Args: ClassVar[type[BaseModel]] = SolveCheckArgs

    async def run(self, args: SolveCheckArgs, ctx: ToolContext) -> ToolResult:
        try:
            with solve_state(ctx) as state:
                step = state.gate(args.step)
                _offered(ctx, args.step, args.asked)
                passed, words = await _check(step.check, args)
                state.record(step, passed, words)
        except SolveError as exc:
            return ToolResult(content=str(exc), is_error=True, summary=str(exc))
        if not passed:
            left = state.max_replans - state.replans
            words = (
                f"Step {args.step} failed its check: {words} Call solve_replan "
                f"({left} of {state.max_replans} replans left)."
            )
            return _result(state, words, error=True)
        if state.status == "solved":
            return _result(state, f"Step {args.step} checked: {words} Every step is done.")
        return _result(state, f"Step {args.step} checked: {words}")


def _offered(ctx: ToolContext, number: int, asked: str) -> None:
    """Where the learner gets forms, a step is checked (and so revealed) only after it was
    offered to them: an answered ask_user of this conversation naming the step, whether they
    chose to try it (their attempt in its free text) or to see it."""
    answered = ctx.deps.answered
    if not ctx.deps.forms or answered is None:
        return  # a terminal: no form can be shown, the steps simply follow
    how = (
        f"Offer step {number} to the learner first: ask_user with a title naming 'Step "
        f"{number}' and options 'try' and 'show', then pass that call's id as asked."
    )
    row = answered(asked) if asked else None
    if row is None or getattr(row, "kind", "") != "ask_user":
        raise SolveError(how)
    if row.status != "answered" or not row.result or row.result.get("cancelled"):
        raise SolveError(f"The learner has not answered that offer. {how}")
    title = str(row.payload.get("title", "")) + str(row.payload.get("description", ""))
    if not re.search(rf"\bstep {number}\b", title, re.I):
        raise SolveError(f"That ask_user does not name step {number}. {how}")


async def _check(kind: str, args: SolveCheckArgs) -> tuple[bool, str]:
    if kind == "arithmetic":
        from deeptutor_jupyter.tools.calculate import CalculationError, evaluate, format_number

        if not args.expression.strip():
            raise SolveError("An arithmetic step is checked with its expression: give one.")
        try:
            value = evaluate(args.expression)
        except CalculationError as exc:
            raise SolveError(f"Cannot evaluate {args.expression!r}: {exc}") from None
        exact = format_number(value)
        if numbers_agree(args.answer, value):
            return True, f"{args.expression} = {exact}."
        return False, f"{args.expression} = {exact}, not {args.answer or '(no answer)'}."
    if kind == "code":
        from deeptutor_jupyter.learning.sandbox import Sandbox, feedback_of

        if not args.code.strip() or not args.tests.strip():
            raise SolveError("A code step is checked with its code and tests: give both.")
        outcome = await Sandbox().run(args.code, args.tests)
        if outcome.status == "not_run":
            # Not a failure of the step: this machine cannot run it; the learner is told so.
            return True, f"not run here, so not verified ({outcome.message})"
        return outcome.passed, feedback_of(outcome, 5.0)
    return True, "a reasoning step, not checked mechanically."


class SolveReplanArgs(LazyModel):
    reason: str = Field(min_length=1, description="Why the plan changes: what the check showed.")
    steps: list[PlannedStep] = Field(
        min_length=1, max_length=MAX_STEPS, description="The new steps from the failed one on."
    )


class SolveReplanTool(Tool[SolveReplanArgs]):
    name: ClassVar[str] = "solve_replan"
    description: ClassVar[str] = (
        "After a failed check: replace the failed step and the ones after it. Bounded: when no "
        "replan is left, the solve is stuck and you say where."
    )
    Args: ClassVar[type[BaseModel]] = SolveReplanArgs

    async def run(self, args: SolveReplanArgs, ctx: ToolContext) -> ToolResult:
        stuck: SolveError | None = None
        with solve_state(ctx) as state:
            try:
                state.replan(args.reason, args.steps)
            except SolveError as exc:
                stuck = exc  # the stuck state is saved too
        if stuck is not None:
            return _result(state, str(stuck), error=True)
        used = f"{state.replans} of {state.max_replans}"
        return _result(state, f"Replanned ({used} replans used): {args.reason}")
