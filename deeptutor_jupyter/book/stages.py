"""The stages of a build: ideation and pages ask the model (JSON replies, validated by the
pydantic models), sources and spine are deterministic, compile runs every example and verifies
every exercise in the sandbox before anything is written."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from deeptutor_jupyter.book.model import Block, BuildState, Chapter, ChapterPlan, SourceRef
from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.providers.base import ChatModel, ChatRequest, TextDelta

MAX_CHAPTERS = 8
SOURCES_PER_CHAPTER = 3
EXCERPT_CHARS = 600
RUN_SECONDS = 10.0

Say = Callable[[str], None]


class BookError(DeepTutorError, ValueError):
    """The build cannot go on (the model's reply is unusable, no knowledge base); it says why
    and what was kept (the build resumes from its saved state)."""

    code = "book"


class _Outline(LazyModel):
    chapters: list[ChapterPlan] = Field(min_length=1, max_length=MAX_CHAPTERS)


class _Pages(LazyModel):
    blocks: list[Block] = Field(min_length=1, max_length=30)


class _Repair(LazyModel):
    code: str


IDEATION = """\
You plan a study notebook for a learner. Topic: {topic}. Level: {level}. Language: {language}.
Course material (knowledge bases): {kbs}.
Reply with JSON only: {{"chapters": [{{"title": "...", "objective": "what the learner can do \
after it", "query": "words to search the course material for"}}]}}, at most {most} chapters, in \
teaching order."""

PAGES = """\
Write chapter {number} of a study notebook on {topic} (level {level}, language {language}).
Chapter: {title}. Objective: {objective}.
Use these passages of the course material and cite them as [n]; cite nothing else:
{sources}
Reply with JSON only: {{"blocks": [...]}}, each block one of:
{{"kind": "text", "markdown": "Markdown with LaTeX and [n] citations"}}
{{"kind": "example", "markdown": "what it shows", "code": "runnable Python, standard library \
only, printing its result"}}
{{"kind": "exercise", "markdown": "the task", "code": "starter code that does not solve it yet", \
"reference_solution": "code that solves it", "tests": "Python asserts on the solution", \
"evaluation_criteria": ["..."]}}
{{"kind": "quiz", "markdown": "what the chapter's short quiz should ask about"}}"""

REPAIR = """\
This worked example failed when run: {error}
Code:
{code}
Reply with JSON only: {{"code": "the corrected code"}}."""


async def ask_json(model: ChatModel, prompt: str, shape: type[BaseModel]) -> Any:
    """One request; the reply parsed as ``shape`` (code fences and chatter around it ignored)."""
    request = ChatRequest(
        model=model.model, messages=[{"role": "user", "content": prompt}], temperature=0.2
    )
    parts = [e.text async for e in model.stream(request) if isinstance(e, TextDelta)]
    reply = re.sub(r"<think>.*?(</think>|$)", "", "".join(parts), flags=re.S | re.I)
    start, end = reply.find("{"), reply.rfind("}")
    try:
        return shape.model_validate(json.loads(reply[start : end + 1]))
    except (ValueError, ValidationError) as exc:
        raise BookError(
            f"The model's reply could not be used ({type(exc).__name__}); the build stopped "
            "and keeps what it has: run the same command again to resume."
        ) from None


async def ideation(state: BuildState, model: ChatModel) -> None:
    prompt = IDEATION.format(
        topic=state.topic,
        level=state.level,
        language=state.language,
        kbs=", ".join(state.kbs) or "none",
        most=MAX_CHAPTERS,
    )
    outline: _Outline = await ask_json(model, prompt, _Outline)
    for number, plan in enumerate(outline.chapters, 1):
        plan.id = f"ch{number}"
    state.outline = outline.chapters


async def find_sources(home: Path, state: BuildState, say: Say) -> dict[str, list[SourceRef]]:
    """Each chapter's passages (the knowledge bases refreshed first, so a changed file is seen)."""
    from deeptutor_jupyter.knowledge import KnowledgeBase, list_kbs

    # A book's own base exists only once it had something to index (--from an empty chat).
    known = {kb["name"] for kb in list_kbs(home)}
    bases = [KnowledgeBase(home, name) for name in state.kbs if name in known]
    for kb in bases:
        say(f"refreshing {kb.name}")
        await asyncio.to_thread(kb.refresh)
    found: dict[str, list[SourceRef]] = {}
    for plan in state.outline:
        hits = []
        for kb in bases:
            hits += await asyncio.to_thread(
                kb.search, plan.query or plan.title, SOURCES_PER_CHAPTER
            )
        hits.sort(key=lambda h: -h.score)
        found[plan.id] = [
            SourceRef(
                n=n,
                kb=h.chunk.kb,
                file=h.chunk.path,
                cell=h.chunk.cell,
                page=h.chunk.page,
                line=h.chunk.line,
                text=h.chunk.text[:EXCERPT_CHARS],
            )
            for n, h in enumerate(hits[:SOURCES_PER_CHAPTER], 1)
        ]
    return found


async def write_pages(state: BuildState, chapter: Chapter, number: int, model: ChatModel) -> None:
    listed = "\n".join(f"[{s.n}] ({s.file}) {s.text}" for s in chapter.sources) or "(none)"
    plan = chapter.plan
    prompt = PAGES.format(
        number=number,
        topic=state.topic,
        level=state.level,
        language=state.language,
        title=plan.title,
        objective=plan.objective,
        sources=listed,
    )
    pages: _Pages = await ask_json(model, prompt, _Pages)
    chapter.blocks, chapter.written, chapter.compiled, chapter.notes = pages.blocks, True, False, []


async def compile_chapter(chapter: Chapter, model: ChatModel, sandbox: Any, hints: bool) -> None:
    """Keep only what works: an example runs (repaired once, else dropped); an exercise's
    reference passes its hidden tests and its starter does not (else dropped); a citation
    names one of the chapter's sources (else removed). In hints mode no solution is kept."""
    known = {s.n for s in chapter.sources}
    kept: list[Block] = []
    for block in chapter.blocks:
        block.markdown = _known_citations(block.markdown, known, chapter.notes)
        if block.kind == "example" and not await _example_runs(block, model, sandbox, chapter):
            continue
        if block.kind == "exercise" and not await _exercise_holds(block, sandbox, chapter):
            continue
        if hints:
            block.reference_solution = ""
        kept.append(block)
    chapter.blocks, chapter.compiled = kept, True


async def _example_runs(block: Block, model: ChatModel, sandbox: Any, chapter: Chapter) -> bool:
    outcome = await sandbox.run(block.code, "", RUN_SECONDS)
    if outcome.passed:
        return True
    if outcome.status == "not_run":
        chapter.notes.append(f"example dropped: it could not be run here ({outcome.message})")
        return False
    repaired: _Repair = await ask_json(
        model, REPAIR.format(error=outcome.message, code=block.code), _Repair
    )
    again = await sandbox.run(repaired.code, "", RUN_SECONDS)
    if again.passed:
        block.code = repaired.code
        chapter.notes.append("example repaired: it failed its first run")
        return True
    chapter.notes.append(f"example dropped: it failed to run ({again.message})")
    return False


async def _exercise_holds(block: Block, sandbox: Any, chapter: Chapter) -> bool:
    if not block.tests.strip() or not block.reference_solution.strip():
        chapter.notes.append("exercise dropped: it had no hidden tests or no reference solution")
        return False
    reference = await sandbox.run(block.reference_solution, block.tests, RUN_SECONDS)
    starter = await sandbox.run(block.code, block.tests, RUN_SECONDS)
    if reference.status == "not_run":
        chapter.notes.append(f"exercise dropped: it could not be run here ({reference.message})")
        return False
    if not reference.passed:
        chapter.notes.append(
            f"exercise dropped: the reference fails its tests ({reference.message})"
        )
        return False
    if starter.passed:
        chapter.notes.append("exercise dropped: the starter already passes its tests")
        return False
    return True


_CITATION = re.compile(r"\[(\d+)\]")


def _known_citations(text: str, known: set[int], notes: list[str]) -> str:
    def keep(match: re.Match[str]) -> str:
        if int(match.group(1)) in known:
            return match.group(0)
        notes.append(f"citation [{match.group(1)}] removed: no such source")
        return ""

    # Inline code is left alone: ``a[0]`` is an index, not a citation.
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") else _CITATION.sub(keep, p) for p in parts)
