"""What a kernel turn carries besides the question: its tools, its prompt blocks, its trace.

One place decides the tool surface (``knowledge.mount.mounted_tools``) from the turn's situation,
gathers the system-prompt blocks (TUTOR.md, what memory knows, the skills), and, when the turn
ends, writes its trace to the learner's memory and into the cell's output bundle.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.config import Settings
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.memory import TraceRecord
    from deeptutor_jupyter.runtime.events import EventLog
    from deeptutor_jupyter.runtime.orchestrator import Turn

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


class PlanError(ValueError):
    """A turn that cannot start as asked (an unknown knowledge base); the text says why."""


@dataclass
class TurnPlan:
    enabled_tools: list[str]
    system_blocks: list[str]
    extra: dict[str, Any] = field(default_factory=dict)


def plan_turn(
    tutor: KernelTutor,
    settings: Settings,
    *,
    kbs: list[str],
    user_tools: tuple[str, ...] | None = None,
    no_tools: bool = False,
) -> TurnPlan:
    from deeptutor_jupyter.kernel.notebook_context import tutor_md_blocks
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
    skills = _skills(home)
    blocks = tutor_md_blocks(tutor.workspace)
    if tutor.memory is not None and (remembered := tutor.memory.system_prompt_block()):
        blocks.append(remembered)
    if skills:
        blocks.append(skills_manifest(skills))
        blocks += always_blocks(skills)
    from deeptutor_jupyter.kernel.learn_commands import turn_blocks

    blocks += turn_blocks(tutor, home)  # where the learner stands on their path
    if kbs:
        blocks.append(
            f"Knowledge bases selected for this turn: {', '.join(kbs)}. Search them with "
            "search_knowledge before answering about the course material, and cite the "
            "passages you use as [n]."
        )
    assert tutor.orchestrator is not None
    registry = tutor.orchestrator.registry
    loaded = tutor.loaded_tools.setdefault(tutor.session_id, set())
    deferred = [n for n in registry.names() if (t := registry.get(n)) and t.deferred]
    tools = mounted_tools(
        MountContext(
            has_kb=bool(kbs),
            has_skills=bool(skills),
            has_deferred=any(n not in loaded for n in deferred),
            user_tools=user_tools,
            no_tools=no_tools,
        ),
        always=(*ALWAYS, *sorted(n for n in loaded if n in deferred)),
    )
    extra = tool_extra(tutor, home, kbs, skills)
    return TurnPlan(tools, blocks, extra)


def tool_extra(
    tutor: KernelTutor, home: Path, kbs: list[str], skills: dict[str, Any]
) -> dict[str, Any]:
    """What the tools of a turn need from the kernel; rebuilt when a saved turn resumes."""
    from deeptutor_jupyter.kernel.learn_commands import learning_of
    from deeptutor_jupyter.memory import new_trace_id

    return {
        # Redacted from tool results (a learner may have the key in a variable or a cell).
        "secrets": [k for k in tutor.secrets() if k],
        "memory": tutor.memory,
        "trace_id": new_trace_id(),
        "kbs": kbs,
        "home": home,
        "skills": skills,
        # load_tools adds here; later turns of the session mount them
        "loaded_tools": tutor.loaded_tools.setdefault(tutor.session_id, set()),
        "quizzes": learning_of(tutor, home).quizzes,  # make_quiz pauses on this coordinator
    }


def resume_extra(tutor: KernelTutor, home: Path, context: dict[str, Any]) -> dict[str, Any]:
    kbs = list((context.get("metadata") or {}).get("kbs", []))
    return tool_extra(tutor, home, kbs, _skills(home))


def _skills(home: Path) -> dict[str, Any]:
    """Built-in < course (DEEPTUTOR_COURSE_DIR) < the learner's own skills."""
    from deeptutor_jupyter.skills import discover_skills, user_skills_dir

    course = os.environ.get("DEEPTUTOR_COURSE_DIR")
    return dict(
        discover_skills(course_dir=Path(course) if course else None, user_dir=user_skills_dir(home))
    )


def record_trace(tutor: KernelTutor, turn: Turn, log: EventLog) -> TraceRecord | None:
    """The turn's L1 trace: written to the learner's memory, returned for the cell's bundle."""
    from deeptutor_jupyter.memory import TraceRecord, summarize_answer

    ctx = turn.ctx
    tools = [e.data["name"] for e in log.events if e.type == "tool_call"]
    asked = [
        {
            "request_id": e.data.get("id", ""),
            "tool_call_id": e.data.get("toolCallId", ""),
            "selections": list(e.data.get("selections", [])),
            "cancelled": bool(e.data.get("cancelled")),
        }
        for e in log.events
        if e.type == "user_input_resolved"
    ]
    started = log.events[0].ts if log.events else 0.0
    record = TraceRecord(
        trace_id=str(turn.extra.get("trace_id") or ctx.turn_id),
        surface="notebook",
        session_id=ctx.session_id,
        turn_id=ctx.turn_id,
        model=ctx.profile.label,
        started_at=started,
        finished_at=log.events[-1].ts if log.events else started,
        question=ctx.question,
        answer_summary=summarize_answer(turn.answer),
        tools=tools,
        ask_user=asked,
        status=turn.status,
        notebook=tutor.notebook,
    )
    if tutor.memory is not None:
        try:
            tutor.memory.emit(record)
        except Exception as exc:  # a full disk must not lose the answer on screen
            log.emit("notice", text=f"The trace of this turn was not saved: {exc}")
    return record


def source_links(hits: list[dict[str, Any]], cwd: Path) -> list[tuple[str, str]]:
    """(label, link) per cited passage; links are relative to the notebook so JupyterLab opens
    the file itself (at the cell or page when the fragment says so)."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for hit in hits:
        key = str(hit.get("chunk_id"))
        if key in seen:
            continue
        seen.add(key)
        path = Path(str(hit.get("path") or hit.get("file", "")))
        try:
            rel = os.path.relpath(path, cwd) if path.is_absolute() else str(path)
        except ValueError:
            rel = str(path)
        fragment = str(hit.get("link", "")).partition("#")[2]
        where = [str(hit.get("file", ""))]
        if hit.get("cell") is not None:
            where.append(f"cell {int(hit['cell']) + 1}")
        if hit.get("page") is not None:
            where.append(f"page {hit['page']}")
        link = rel.replace(" ", "%20") + (f"#{fragment}" if fragment else "")
        out.append((", ".join(where), link))
    return out


def sources_markdown(links: list[tuple[str, str]]) -> str:
    if not links:
        return ""
    rows = [f"{n}. [{label}]({link})" for n, (label, link) in enumerate(links, start=1)]
    return "**Sources**\n\n" + "\n".join(rows)
