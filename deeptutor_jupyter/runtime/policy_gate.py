"""How the kernel applies the policy of learning/policy.py to a turn.

- ``RefusingModel`` stands in for the model when the policy is ``off`` or the hints are used
  up: the turn runs as any other (one view, one trace) but nothing leaves the machine, and it
  ends with an error event that says why.
- ``HintsOnlyModel`` wraps the real model in ``hints`` mode and withholds fenced code blocks
  from what it streams, so the learner, the saved notebook and the history never get one.
- ``HintLedger`` counts the hints per notebook and cell in the learner's ``state.db``.
- ``ExerciseCheck``: in an exercise cell with hidden tests, the answer's code blocks are run
  against them in the sandbox before the answer is shown; one that passes is the solution, so
  the learner gets the next hint instead.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deeptutor_jupyter.learning.policy import (
    CAP_REACHED,
    DEFAULT_HINTS,
    Decision,
    decide,
    find_policy,
    hints_block,
)
from deeptutor_jupyter.providers.base import (
    ChatRequest,
    Compat,
    Message,
    ProviderError,
    ProviderEvent,
    RoundEnd,
    TextDelta,
    ThinkingDelta,
)

WITHHELD = "\n*[Code withheld: the instructor's policy here is hints only.]*\n"
FENCE = ("```", "~~~")
SOLVED = (
    "*[An answer was withheld: its code passes this exercise's hidden tests, and the "
    "instructor's policy here is hints only.]*\n\n"
)
CHECK_SECONDS = 10.0
# A block the model left unclosed runs to the end, as CodeFilter withholds it to the end.
_BLOCK = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n(.*?)(?:^[ \t]*\1|\Z)", re.DOTALL | re.MULTILINE)


class RefusingModel:
    """A model that is never asked: its one round fails with the policy's words."""

    def __init__(self, label: tuple[str, str], message: str, hint: str = "") -> None:
        self.provider, self.model = label
        self.compat = Compat()
        self.message, self.hint = message, hint

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        raise ProviderError("policy", self.message, hint=self.hint)
        yield  # pragma: no cover - makes this an async generator

    async def aclose(self) -> None:
        return None


class CodeFilter:
    """Streamed text in, the same text out with each fenced code block replaced by a notice.

    Works line by line: a fence opens only at the start of a line, so inline code stays."""

    def __init__(self) -> None:
        self.partial = ""
        self.inside = False

    def feed(self, text: str) -> str:
        self.partial += text
        *lines, self.partial = self.partial.split("\n")
        out = [self._line(line + "\n") for line in lines]
        # A partial line that cannot open a fence is passed on now, so the answer still streams.
        if not self.inside and self.partial and not _may_fence(self.partial):
            out.append(self.partial)
            self.partial = ""
        return "".join(out)

    def flush(self) -> str:
        rest, self.partial = self.partial, ""
        return self._line(rest) if rest else ""

    def _line(self, line: str) -> str:
        if line.lstrip().startswith(FENCE):
            self.inside = not self.inside
            return WITHHELD if self.inside else ""
        return "" if self.inside else line


def _may_fence(partial: str) -> bool:
    head = partial.lstrip()
    return any(f.startswith(head[:3]) for f in FENCE) if len(head) < 3 else head.startswith(FENCE)


def code_blocks(text: str) -> list[str]:
    """The fenced code blocks of an answer, in order."""
    return [m.group(2) for m in _BLOCK.finditer(text)]


def withhold_code(text: str) -> str:
    code = CodeFilter()
    return code.feed(text) + code.flush()


@dataclass
class ExerciseCheck:
    """The exercise cell's hidden tests, and how to take the next rung of its ladder."""

    tests: str
    decision: Decision
    next_rung: Callable[[], int | None]  # the ledger's next hint, None past the cap
    sandbox: Any = None  # learning.sandbox.Sandbox; made on first use (it reads the settings)

    async def solves(self, text: str) -> bool:
        """Whether the answer's code blocks pass the hidden tests: all of them together, or
        one alone (an answer may split the solution or add a demo that fails)."""
        blocks = code_blocks(text)
        if not blocks:
            return False
        if self.sandbox is None:
            from deeptutor_jupyter.learning.sandbox import Sandbox

            self.sandbox = Sandbox()
        tries = ["\n\n".join(blocks), *(blocks if len(blocks) > 1 else [])]
        for code in tries:
            if (await self.sandbox.run(code, self.tests, CHECK_SECONDS)).passed:
                return True
        return False

    def retry(self, request: ChatRequest, answer: str, rung: int) -> ChatRequest:
        """The same request, told that its answer was withheld and which hint to give now.
        Without tools: the loop that sent the request knows nothing of this exchange."""
        said: list[Message] = [
            {"role": "assistant", "content": answer},
            {
                "role": "user",
                "content": "That answer was withheld from the learner: its code passes the "
                "exercise's hidden tests, so it is the solution. "
                + hints_block(self.decision, rung),
            },
        ]
        return dataclasses.replace(request, messages=[*request.messages, *said], tools=None)


async def _reasoning_withheld(
    events: AsyncIterator[ProviderEvent],
) -> AsyncIterator[ProviderEvent]:
    """The model's reasoning (its own channel) is shown to the learner too: its code blocks
    are withheld as the answer's are."""
    code = CodeFilter()
    async for event in events:
        if isinstance(event, ThinkingDelta):
            if text := code.feed(event.text):
                yield ThinkingDelta(text)
            continue
        if isinstance(event, RoundEnd) and (rest := code.flush()):
            yield ThinkingDelta(rest)
        yield event


class HintsOnlyModel:
    """The real model, with code blocks withheld from what it says (hints mode); with an
    ``ExerciseCheck``, each round's answer is held until its code was run against the hidden
    tests, and one that passes them is replaced by the next hint."""

    def __init__(self, inner: Any, check: ExerciseCheck | None = None) -> None:
        self.inner, self.check = inner, check
        self.provider, self.model, self.compat = inner.provider, inner.model, inner.compat

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        if self.check is None:
            async for event in self._withholding(request):
                yield event
            return
        held: list[str] = []
        async for event in _reasoning_withheld(self.inner.stream(request)):
            if isinstance(event, TextDelta):
                held.append(event.text)
            elif isinstance(event, RoundEnd):
                answer = "".join(held)
                if not await self.check.solves(answer):
                    if answer:
                        yield TextDelta(withhold_code(answer))
                    yield event
                    return
                async for replaced in self._next_hint(request, answer):
                    yield replaced
                return
            else:
                yield event

    async def _next_hint(self, request: ChatRequest, answer: str) -> AsyncIterator[ProviderEvent]:
        assert self.check is not None
        rung = self.check.next_rung()
        if rung is None:
            cap = self.check.decision.hints or 0
            said = CAP_REACHED.format(cap=cap, source=self.check.decision.source)
            yield TextDelta(SOLVED + said)
            yield RoundEnd("stop")
            return
        cap = self.check.decision.hints or 0
        # The badge said the rung this turn began with; the learner is told this one's.
        yield TextDelta(f"{SOLVED}*Hint {rung} of {cap} instead:*\n\n")
        held: list[str] = []
        retry = self.check.retry(request, answer, rung)
        async for event in _reasoning_withheld(self.inner.stream(retry)):
            if isinstance(event, TextDelta):
                held.append(event.text)
            elif isinstance(event, RoundEnd):
                hint = "".join(held)
                # The retry too is checked: a model that insists gets no answer at all.
                if hint and not await self.check.solves(hint):
                    yield TextDelta(withhold_code(hint))
                yield event
            else:
                yield event

    async def _withholding(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        code = CodeFilter()
        async for event in _reasoning_withheld(self.inner.stream(request)):
            if isinstance(event, TextDelta):
                if text := code.feed(event.text):
                    yield TextDelta(text)
                continue
            if isinstance(event, RoundEnd) and (rest := code.flush()):
                yield TextDelta(rest)
            yield event

    async def aclose(self) -> None:
        return None  # the session owns the inner model and closes it


class PolicyGuard:
    """A turn's model that reads the policy again before each round: a turn that waited on the
    learner (a form, a quiz) into an ``off`` window stops there instead of asking the model."""

    def __init__(
        self, inner: Any, now: Callable[[], Decision], exercise: str | None = None
    ) -> None:
        self.inner, self.now, self.exercise = inner, now, exercise
        self.provider, self.model, self.compat = inner.provider, inner.model, inner.compat

    async def stream(self, request: ChatRequest) -> AsyncIterator[ProviderEvent]:
        decision = self.now()
        if decision.mode == "off":
            raise ProviderError("policy", decision.refusal())
        if self.exercise and request.exercise is None:
            request = dataclasses.replace(request, exercise=self.exercise)
        async for event in self.inner.stream(request):
            yield event

    async def aclose(self) -> None:
        return None  # the session owns the inner model and closes it


class HintLedger:
    """Hints used per notebook and cell, in the learner's ``state.db`` (its own table)."""

    def __init__(self, db: Path) -> None:
        self.path = db
        self._conn = sqlite3.connect(db, check_same_thread=False, timeout=10)
        self._lock = threading.Lock()
        with self._lock, self._conn:
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS policy_hints (notebook TEXT NOT NULL, "
                "cell TEXT NOT NULL, used INTEGER NOT NULL, PRIMARY KEY (notebook, cell))"
            )

    def used(self, notebook: str, cell: str) -> int:
        with self._lock:
            row = self._conn.execute(
                "SELECT used FROM policy_hints WHERE notebook = ? AND cell = ?", (notebook, cell)
            ).fetchone()
        return int(row[0]) if row else 0

    def take(self, notebook: str, cell: str, cap: int) -> int | None:
        """The number of the hint taken now, or None when ``cap`` are used (one transaction)."""
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT INTO policy_hints VALUES (?, ?, 0) ON CONFLICT DO NOTHING", (notebook, cell)
            )
            cur = self._conn.execute(
                "UPDATE policy_hints SET used = used + 1 WHERE notebook = ? AND cell = ? "
                "AND used < ? RETURNING used",
                (notebook, cell, cap),
            )
            row = cur.fetchone()
        return int(row[0]) if row else None

    def close(self) -> None:
        self._conn.close()


class PolicyGate:
    """What the policy makes of one turn: the model it talks to (the real one, the one that
    withholds code, or one that is never asked), the prompt block and the badge."""

    def __init__(self, sandbox: Any = None) -> None:
        self._ledger: HintLedger | None = None
        self.sandbox = sandbox  # for the exercise check; None: the configured sandbox

    def ledger(self, home: Path) -> HintLedger:
        db = home / "state.db"
        if self._ledger is None or self._ledger.path != db:
            self._ledger = HintLedger(db)
        return self._ledger

    def gate(self, home: Path, workspace: Path, tags: tuple[str, ...]) -> Decision:
        from deeptutor_jupyter.runtime.course import course_packs

        packs = [p.tutor_md for p in course_packs(home, wait=0) if p.tutor_md is not None]
        return decide(find_policy(workspace, packs), tags=tags)

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None

    def apply(
        self,
        decision: Decision,
        model: Any,
        home: Path,
        notebook: str,
        cell: str | None,
        workspace: Path,
        tags: tuple[str, ...] = (),
        hidden_tests: str = "",
    ) -> GatedTurn:
        label = (model.provider, model.model)
        if decision.mode == "off":
            hint = "`%tutor review` and `%tutor progress` still work; they need no model."
            return GatedTurn(decision, RefusingModel(label, decision.refusal(), hint))
        exercise = exercise_id(notebook, cell)
        if decision.mode != "hints":
            return GatedTurn(decision, self.guard(model, home, workspace, tags, exercise))
        cap = decision.hints if decision.hints is not None else DEFAULT_HINTS
        rung = self.ledger(home).take(notebook, cell or "", cap)
        if rung is None:
            said = CAP_REACHED.format(cap=cap, source=decision.source)
            return GatedTurn(decision, RefusingModel(label, said), used=cap)
        check = None
        if hidden_tests and cell:
            ledger = self.ledger(home)
            check = ExerciseCheck(
                hidden_tests, decision, lambda: ledger.take(notebook, cell, cap), self.sandbox
            )
        guarded = self.guard(HintsOnlyModel(model, check), home, workspace, tags, exercise)
        return GatedTurn(decision, guarded, [hints_block(decision, rung)], rung)

    def guard(
        self,
        model: Any,
        home: Path,
        workspace: Path,
        tags: tuple[str, ...],
        exercise: str | None = None,
    ) -> Any:
        """The model, with the policy read again before each of its rounds (PolicyGuard)."""
        return PolicyGuard(model, lambda: self.gate(home, workspace, tags), exercise)


def exercise_id(notebook: str, cell: str | None) -> str | None:
    """What the course service counts a hint against: the notebook's file name and the cell's
    id, the same for every student of a handed-out notebook (hub/hints.py)."""
    if not cell:
        return None
    return f"{Path(notebook).name}#{cell}"


@dataclass
class GatedTurn:
    decision: Decision
    model: Any
    blocks: list[str] = field(default_factory=list)
    used: int | None = None

    @property
    def badge(self) -> str:
        return self.decision.badge(self.used)

    def payload(self) -> dict[str, Any]:
        return {**self.decision.payload(self.used), "refused": self.refused}

    @property
    def refused(self) -> bool:
        return isinstance(self.model, RefusingModel)
