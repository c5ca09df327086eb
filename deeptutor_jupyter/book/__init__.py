"""``%tutor book <topic>``: a study notebook compiled from the course's material.

A second runtime beside the turns, as DeepTutor's BookEngine is (its output is a notebook the
learner keeps, not a streamed answer): ideation (the outline) → sources (each chapter's passages
in the knowledge bases) → spine (which chapters must be written: new, or their sources changed)
→ pages (the model writes each chapter as typed blocks) → compile (examples run and exercises
verified in the sandbox, citations checked) → the notebook, written through
``deeptutor_jupyter.cells`` only. The state is saved after every step in
``$DEEPTUTOR_HOME/books/<slug>.json``: a stopped build resumes where it was, a rebuild rewrites
only the chapters whose sources changed, and the learner's own edits are never dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deeptutor_jupyter import _files
from deeptutor_jupyter.book.model import STAGES, BuildState, Chapter, fingerprint, slug
from deeptutor_jupyter.book.stages import BookError

__all__ = [
    "STAGES",
    "BookError",
    "BuildReport",
    "BuildState",
    "build_book",
    "open_state",
    "own_sources",
]

Progress = Callable[[str, str], None]  # (stage, what it is doing)


@dataclass
class BuildReport:
    notebook: Path
    written: list[str] = field(default_factory=list)  # chapters (re)written this time
    kept: list[str] = field(default_factory=list)  # chapters unchanged since the last build
    notes: list[str] = field(default_factory=list)  # what compile dropped or repaired

    def markdown(self) -> str:
        lines = [f"Study notebook: `{self.notebook.name}`."]
        if self.written:
            lines.append(f"Written: {', '.join(self.written)}.")
        if self.kept:
            lines.append(f"Unchanged: {', '.join(self.kept)}.")
        lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines)


def own_sources(
    home: Path,
    topic: str,
    *,
    conversation: list[Any] | None = None,
    paths: Sequence[Path] = (),
) -> str | None:
    """The book's own knowledge base (``book-<slug>``) for ``--from``: the files given, and this
    notebook's conversation written as Markdown (rewritten at each build, so a rebuild sees what
    was said since). Indexed like any knowledge base, so its passages are cited the same way.
    None when there is nothing to add."""
    from deeptutor_jupyter.knowledge import KnowledgeBase

    files = list(paths)
    if conversation:
        said = [
            f"**{m.get('role', '')}**: {m['content']}"
            for m in conversation
            if m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)
        ]
        if said:
            path = home / "books" / f"{slug(topic)}-conversation.md"
            _files.ensure_private_dir(path.parent)
            _files.atomic_write_text(path, "# Our conversation\n\n" + "\n\n".join(said) + "\n")
            files.append(path)
    if not files:
        return None
    name = f"book-{slug(topic)}"
    KnowledgeBase(home, name).add_sources(files)
    return name


def state_path(home: Path, topic: str) -> Path:
    return home / "books" / f"{slug(topic)}.json"


def open_state(home: Path, wanted: BuildState) -> BuildState:
    """The saved build of this topic when it was made with the same options, else ``wanted``
    (a new level, knowledge base or policy is a new book)."""
    path = state_path(home, wanted.topic)
    if not path.exists():
        return wanted
    saved = BuildState.model_validate_json(path.read_text(encoding="utf-8"))
    same = ("level", "language", "kbs", "hints", "notebook")
    if all(getattr(saved, k) == getattr(wanted, k) for k in same):
        return saved
    return wanted


async def build_book(
    home: Path,
    state: BuildState,
    model: Any,
    *,
    progress: Progress = lambda _stage, _what: None,
    sandbox: Any = None,
    frontend: Any = None,
) -> BuildReport:
    """Build or resume or update the book of ``state``. ``frontend`` (kernel/cells_comm.py's
    ``LabFrontend`` for the book's notebook) says whether JupyterLab has the notebook open:
    then nothing is written under it and the build stops, resumable."""
    from deeptutor_jupyter.book import stages

    if sandbox is None:
        from deeptutor_jupyter.learning.sandbox import Sandbox

        sandbox = Sandbox()
    path = state_path(home, state.topic)
    _files.ensure_private_dir(path.parent)

    def save(stage: str) -> None:
        state.stage = stage
        _files.atomic_write_text(path, state.model_dump_json(indent=1))

    progress("ideation", "planning the chapters")
    if not state.outline:
        await stages.ideation(state, model)
    save("sources")
    progress("sources", "searching the course material")
    found = await stages.find_sources(home, state, lambda what: progress("sources", what))
    report = BuildReport(Path(state.notebook))
    progress("spine", "deciding what to write")
    for plan in state.outline:
        refs = found.get(plan.id, [])
        chapter = state.chapters.get(plan.id)
        if chapter is None or chapter.fingerprint != fingerprint(refs):
            state.chapters[plan.id] = Chapter(
                plan=plan, sources=refs, fingerprint=fingerprint(refs)
            )
    save("pages")
    for number, plan in enumerate(state.outline, 1):
        chapter = state.chapters[plan.id]
        if chapter.written:
            continue
        progress("pages", f"writing chapter {number}: {plan.title}")
        await stages.write_pages(state, chapter, number, model)
        report.written.append(plan.title)
        save("pages")
    for number, plan in enumerate(state.outline, 1):
        chapter = state.chapters[plan.id]
        if not chapter.compiled:
            progress("compile", f"running the examples of chapter {number}")
            await stages.compile_chapter(chapter, model, sandbox, state.hints)
            save("compile")
    name = Path(state.notebook).name
    # A notebook that does not exist yet is open nowhere: only a rebuild asks.
    exists = Path(state.notebook).exists()
    if frontend is not None and exists and await frontend.is_open():
        raise BookError(
            f"{name} is open in JupyterLab: close it, then run the same line again (the build "
            "is kept and only the writing of the notebook is left)."
        )
    progress("compile", f"writing {name}")
    _write_notebook(state, report)
    save("done")
    return report


def _book_of(cell: dict[str, Any]) -> Any:
    return ((cell.get("metadata") or {}).get("deeptutor") or {}).get("book")


def _write_notebook(state: BuildState, report: BuildReport) -> None:
    from deeptutor_jupyter import cells
    from deeptutor_jupyter.book.notebook import INTRO, chapter_cells, intro_cells, merge

    book = slug(state.topic)
    fresh = {INTRO: intro_cells(state, book)}
    changed: set[str] = set()
    for number, plan in enumerate(state.outline, 1):
        chapter = state.chapters[plan.id]
        fresh[plan.id] = chapter_cells(chapter, number, book)
        if not chapter.in_notebook:
            changed.add(plan.id)
        elif plan.title not in report.written:
            report.kept.append(plan.title)
        report.notes += [f"{plan.title}: {note}" for note in chapter.notes]
    nb = cells.read(Path(state.notebook))
    if nb.cells and not any(_book_of(c) == book for c in nb.cells):
        raise BookError(
            f"{nb.path.name} already exists and is not this book; nothing was written to it. "
            "Rename or move it, then run the same line again (the build resumes)."
        )
    nb.notebook["cells"] = merge(nb.cells, fresh, changed)
    if state.hints:  # also from the cells kept (an exercise the learner had started)
        for cell in nb.cells:
            ((cell.get("metadata") or {}).get("deeptutor") or {}).pop("reference_solution", None)
    cells.write_back(nb)  # refused, writing nothing, if the learner saved it since it was read
    for plan in state.outline:
        state.chapters[plan.id].in_notebook = True
