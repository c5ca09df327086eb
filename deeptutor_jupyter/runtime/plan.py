"""What a turn carries besides the question: its tools, its prompt blocks, its trace.

One place decides the tool surface (``knowledge.mount.mounted_tools``) from the turn's situation,
gathers the system-prompt blocks (TUTOR.md, what memory knows, the skills), and, when the turn
ends, writes its trace to the learner's memory (the surface puts it in its output too). Each
``TutorSession`` owns one ``Planner``, which keeps the deferred tools each conversation loaded;
it knows the session only through what it is handed, so this module imports no session.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.errors import DeepTutorError

if TYPE_CHECKING:
    from deeptutor_jupyter.config import Settings
    from deeptutor_jupyter.memory import MemoryStore, TraceRecord
    from deeptutor_jupyter.runtime.course_files import Pack
    from deeptutor_jupyter.runtime.events import EventLog
    from deeptutor_jupyter.runtime.orchestrator import Turn
    from deeptutor_jupyter.tools.base import Tool, ToolDeps
    from deeptutor_jupyter.tools.registry import ToolRegistry

ALWAYS = (
    "ask_user",
    "make_quiz",
    "calculate",
    "read_notebook",
    "last_error",
    "inspect_variable",
    "read_memory",
    "write_memory",
)


class PlanError(DeepTutorError, ValueError):
    code = "plan"

    """A turn that cannot start as asked (an unknown knowledge base); the text says why."""


@dataclass
class TurnPlan:
    enabled_tools: list[str]
    system_blocks: list[str]
    deps: ToolDeps


def runtime_tools() -> list[Tool[Any]]:
    """The tools every session has besides its surface's own (memory, knowledge, skills)."""
    from deeptutor_jupyter.knowledge.tools import SearchKnowledgeTool
    from deeptutor_jupyter.memory.tools import ReadMemoryTool, WriteMemoryTool
    from deeptutor_jupyter.skills import ReadSkillTool
    from deeptutor_jupyter.tools.light import SOLVE_TOOLS, LazyTool

    # The solve tools are registered everywhere (a saved solve resumes in any process) and
    # mounted only in solve turns (plan_turn): they stand in until one is sent or called, so a
    # chat request imports no solve code (tools/light.py).
    solve = "deeptutor_jupyter.solve.tools"
    classes = ("SolvePlanTool", "SolveCheckTool", "SolveReplanTool")
    return [
        ReadMemoryTool(),
        WriteMemoryTool(),
        SearchKnowledgeTool(),
        ReadSkillTool(),
        *(LazyTool(n, solve, c, deferred=False) for n, c in zip(SOLVE_TOOLS, classes, strict=True)),
    ]


class Planner:
    """The planning part of one session: it owns the deferred tools each of its conversations
    loaded and the registry of the session's tools; the session hands it the memory and, as
    callables, the learner's learning state and the secrets to redact."""

    def __init__(
        self,
        registry: ToolRegistry,
        memory: MemoryStore | None,
        *,
        notebook: str,
        surface: str,
        secrets: Callable[[], list[str]],
        standing: Callable[[Path], str],
        quizzes: Callable[[Path], Any],
        answered: Callable[[str, str], Any] = lambda _session, _call: None,
    ) -> None:
        self.registry = registry
        self._memory = memory
        self._notebook = notebook
        self._surface = surface
        self._secrets = secrets
        self._standing = standing  # where the learner stands on their path (runtime/learning.py)
        self._quizzes = quizzes  # the quiz coordinator make_quiz pauses on
        self._answered = answered  # (conversation, tool call id) -> its pending row
        self._loaded: dict[str, set[str]] = {}  # conversation id -> deferred tools loaded

    def loaded_tools(self, session_id: str) -> set[str]:
        return self._loaded.setdefault(session_id, set())

    def plan_turn(
        self,
        session_id: str,
        settings: Settings,
        *,
        kbs: list[str],
        user_tools: tuple[str, ...] | None = None,
        no_tools: bool = False,
        instructions: list[str] | None = None,
        capability: str = "chat",
    ) -> TurnPlan:
        from deeptutor_jupyter.knowledge import list_kbs
        from deeptutor_jupyter.knowledge.mount import MountContext, mounted_tools
        from deeptutor_jupyter.skills import always_blocks, skills_manifest

        home = settings.home
        known = {kb["name"] for kb in list_kbs(home)}
        unknown = [name for name in kbs if name not in known]
        if unknown:
            listed = ", ".join(sorted(known)) or "none yet"
            raise PlanError(
                f"No knowledge base named {', '.join(unknown)}. Known: {listed}. "
                "Create one with `%tutor kb add <name> <folder>`."
            )
        from deeptutor_jupyter.runtime.course import course_kbs, course_packs, instruction_blocks

        # The course's packs (a JupyterHub course service): instructions, skills, knowledge base.
        packs = course_packs(home)
        kbs = [*kbs, *(kb for kb in course_kbs(home, packs) if kb not in kbs)]
        skills = _skills(home, packs)
        blocks = [*instruction_blocks(packs), *(instructions or [])]
        if self._memory is not None and (remembered := self._memory.system_prompt_block()):
            blocks.append(remembered)
        if skills:
            blocks.append(skills_manifest(skills))
            blocks += always_blocks(skills)
        if standing := self._standing(home):
            blocks.append(standing)  # where the learner stands on their path
        if kbs:
            blocks.append(
                f"Knowledge bases selected for this turn: {', '.join(kbs)}. Search them with "
                "search_knowledge before answering about the course material, and cite the "
                "passages you use as [n]."
            )
        solving: tuple[str, ...] = ()
        if capability == "solve":
            from deeptutor_jupyter.solve.tools import INSTRUCTIONS
            from deeptutor_jupyter.tools.light import SOLVE_TOOLS

            blocks.append(INSTRUCTIONS)
            solving = SOLVE_TOOLS
        registry = self.registry
        loaded = self.loaded_tools(session_id)
        deferred = [n for n in registry.names() if (t := registry.get(n)) and t.deferred]
        tools = mounted_tools(
            MountContext(
                has_kb=bool(kbs),
                has_skills=bool(skills),
                has_deferred=any(n not in loaded for n in deferred) or registry.pending_sources(),
                user_tools=user_tools,
                no_tools=no_tools,
            ),
            # Only what this session registered: a surface without a kernel has no notebook tools.
            always=(
                *(n for n in ALWAYS if registry.get(n)),
                *(n for n in solving if registry.get(n)),
                *sorted(n for n in loaded if n in deferred),
            ),
        )
        return TurnPlan(tools, blocks, self.tool_deps(session_id, home, kbs, skills))

    def tool_deps(
        self, session_id: str, home: Path, kbs: list[str], skills: dict[str, Any]
    ) -> ToolDeps:
        """What the tools of a turn need from the session; rebuilt when a saved turn resumes."""
        from deeptutor_jupyter.memory import new_trace_id
        from deeptutor_jupyter.tools.base import ToolDeps

        return ToolDeps(
            home=home,
            memory=self._memory,
            trace_id=new_trace_id(),
            kbs=list(kbs),
            skills=skills,
            secrets=self._secrets(),
            # load_tools adds here; later turns of the conversation mount them
            loaded_tools=self.loaded_tools(session_id),
            quizzes=self._quizzes(home),  # make_quiz pauses on this coordinator
            answered=lambda call_id: self._answered(session_id, call_id),
        )

    def resume_deps(self, session_id: str, home: Path, kbs: list[str]) -> ToolDeps:
        from deeptutor_jupyter.runtime.course_files import installed

        return self.tool_deps(session_id, home, kbs, _skills(home, installed(home)))

    def record_trace(self, turn: Turn, log: EventLog) -> TraceRecord | None:
        """The turn's L1 trace: written to the learner's memory, returned for the surface."""
        from deeptutor_jupyter.agent.events import Notice, ToolCallStarted, UserInputResolved
        from deeptutor_jupyter.memory import TraceRecord, summarize_answer
        from deeptutor_jupyter.redact import scrub_text, usable

        ctx = turn.ctx
        tools: list[str] = []
        asked: list[dict[str, Any]] = []
        for event in log.events:
            match event.body:
                case ToolCallStarted(name=name):
                    tools.append(name)
                case UserInputResolved() as answer:
                    asked.append(
                        {
                            "request_id": answer.id,
                            "tool_call_id": answer.tool_call_id,
                            "selections": list(answer.selections),
                            "cancelled": answer.cancelled,
                        }
                    )
        started = log.events[0].ts if log.events else 0.0
        record = TraceRecord(
            trace_id=turn.deps.trace_id or ctx.turn_id,
            surface=self._surface,
            session_id=ctx.session_id,
            turn_id=ctx.turn_id,
            model=ctx.profile.label,
            started_at=started,
            finished_at=log.events[-1].ts if log.events else started,
            question=scrub_text(ctx.question, usable(self._secrets())),
            answer_summary=summarize_answer(turn.answer),
            tools=tools,
            ask_user=asked,
            status=turn.status,
            notebook=self._notebook,
            kbs=[str(k) for k in ctx.metadata.get("kbs") or []],
            # Regenerated: the old turn's trace stays in L1, this one names it.
            **({"replaces": ctx.metadata["replaces"]} if ctx.metadata.get("replaces") else {}),
        )
        if self._memory is not None:
            try:
                self._memory.emit(record)
            except Exception as exc:  # a full disk must not lose the answer on screen
                log.emit(Notice(text=f"The trace of this turn was not saved: {exc}"))
        return record


def _skills(home: Path, packs: list[Pack]) -> dict[str, Any]:
    """Built-in < course (DEEPTUTOR_COURSE_DIR, then the course's packs) < the learner's own."""
    from deeptutor_jupyter.skills import discover_skills, user_skills_dir

    course = os.environ.get("DEEPTUTOR_COURSE_DIR")
    dirs = [Path(course)] if course else []
    dirs += [p.skills_dir for p in packs if p.skills_dir is not None]
    return dict(discover_skills(course_dir=dirs, user_dir=user_skills_dir(home)))
