"""Guided solving: the model plans, a deterministic gate checks each step, replans are bounded.

The chat loop is the solver (DeepTutor's ``capabilities/solve``): how to solve is the model's
work, with the tools every turn has. What can be computed exactly is not left to it: the plan it
committed to, the order of the steps, each step's check (arithmetic by ``calculate``'s evaluator,
code by the sandbox), and how many times it may replan before it must say where it is stuck.
This module is that state machine, pure; solve/tools.py exposes it as typed tools and keeps the
state of each solve in the learner's home so a solve paused on a question resumes anywhere.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.lazy_model import LazyModel

MAX_REPLANS = 2
MAX_STEPS = 12

CheckKind = Literal["reasoning", "arithmetic", "code"]


class SolveError(DeepTutorError, ValueError):
    """The gate refuses a call (a step out of order, a check on a failed plan); the text says
    why and what to do, for the model to read."""

    code = "solve"


class PlannedStep(LazyModel):
    title: str = Field(min_length=1, max_length=200, description="What this step does.")
    check: CheckKind = Field(
        "reasoning",
        description="How the step is checked: 'arithmetic' (a calculation), 'code' (code with "
        "tests, run in the sandbox) or 'reasoning' (an argument, no mechanical check).",
    )


class Step(PlannedStep):
    status: Literal["open", "done", "failed"] = "open"
    result: str = ""  # the checked answer, or why the check failed


class SolveState(LazyModel):
    """One solve: its steps, where it stands and the replans it has used."""

    problem: str = ""
    steps: list[Step] = Field(default_factory=list)
    replans: int = 0
    max_replans: int = MAX_REPLANS
    reasons: list[str] = Field(default_factory=list)  # why each replan was made
    status: Literal["planning", "solving", "solved", "stuck"] = "planning"
    stuck_at: str = ""

    @property
    def current(self) -> int:
        """The 1-based number of the first step not done (len + 1 when all are)."""
        for number, step in enumerate(self.steps, 1):
            if step.status != "done":
                return number
        return len(self.steps) + 1

    def commit(self, steps: list[PlannedStep]) -> None:
        if self.status != "planning":
            raise SolveError(
                "The plan is already committed; change it with solve_replan after a failed check."
            )
        self.steps = [Step(**s.model_dump()) for s in _bounded(steps)]
        self.status = "solving"

    def gate(self, number: int) -> Step:
        """The step ``number`` if it may be checked now, else ``SolveError`` saying why."""
        if self.status == "planning":
            raise SolveError("Commit a plan with solve_plan first.")
        if self.status == "stuck":
            raise SolveError(f"The solve is stuck at {self.stuck_at}; no step is checked now.")
        if self.status == "solved":
            raise SolveError("Every step is done; give the learner the answer.")
        current = self.current
        if self.steps[current - 1].status == "failed":
            raise SolveError(
                f"Step {current} failed its check; call solve_replan before checking again."
            )
        if number != current:
            raise SolveError(f"Step {current} comes first: steps are checked in order.")
        return self.steps[number - 1]

    def record(self, step: Step, passed: bool, result: str) -> None:
        step.status, step.result = ("done" if passed else "failed"), result
        if passed and self.current > len(self.steps):
            self.status = "solved"

    def replan(self, reason: str, steps: list[PlannedStep]) -> None:
        """Replace the steps from the failed one on; the done ones stay. Past the bound the
        solve is stuck, and says where."""
        current = self.current
        failed = current <= len(self.steps) and self.steps[current - 1].status == "failed"
        if not failed:
            raise SolveError("Replan only after a step failed its check.")
        if self.replans >= self.max_replans:
            step = self.steps[current - 1]
            self.status = "stuck"
            self.stuck_at = f"step {current} ({step.title}): {step.result}"
            raise SolveError(
                f"No replan left ({self.replans} of {self.max_replans} used): stuck at "
                f"{self.stuck_at}. Tell the learner where you are stuck and what you tried; "
                "do not present an answer."
            )
        done = self.steps[: current - 1]
        self.steps = [*done, *(Step(**s.model_dump()) for s in _bounded(steps, len(done)))]
        self.replans += 1
        self.reasons.append(reason)

    def markdown(self) -> str:
        """The plan as the learner sees it: titles and where each step stands."""
        marks = {"open": "☐", "done": "☑", "failed": "☒"}
        lines = [f"{marks[s.status]} {n}. {s.title}" for n, s in enumerate(self.steps, 1)]
        return "\n".join(lines)


def _bounded(steps: list[PlannedStep], done: int = 0) -> list[PlannedStep]:
    if not steps:
        raise SolveError("A plan needs at least one step.")
    if done + len(steps) > MAX_STEPS:
        raise SolveError(f"A plan has at most {MAX_STEPS} steps; merge some.")
    return steps


def numbers_agree(given: str, expected: float | int) -> bool:
    """Whether the model's stated answer is the calculated value (exact for integers, a relative
    1e-9 otherwise). The answer must be a number (``391``, ``-2.5``, ``3/4``): restating the
    expression would pass any check."""
    value = _number(given.replace(",", "").replace(" ", ""))
    if value is None:
        return False
    if isinstance(value, int) and isinstance(expected, int):
        return value == expected
    scale = max(abs(float(value)), abs(float(expected)), 1.0)
    return abs(float(value) - float(expected)) <= 1e-9 * scale


def _number(text: str) -> int | float | None:
    numerator, _, denominator = text.partition("/")
    try:
        if denominator:
            return int(numerator) / int(denominator)
        return int(text)
    except (ValueError, ZeroDivisionError):
        pass
    try:
        return float(text) if not denominator else None
    except ValueError:
        return None
