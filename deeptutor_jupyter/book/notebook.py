"""A book as notebook cells, and a rebuild merged into the notebook the learner already has.

Every cell the book writes carries ``metadata.deeptutor`` (docs/book.md#cell-metadata):
``book``, ``chapter``, ``block`` and ``written`` (a hash of the source as the book wrote it).
An exercise cell is tagged ``exercise`` and keeps, under ``metadata.deeptutor``,
``hidden_tests``, ``reference_solution`` (left out when the instructor's policy is hints) and
``evaluation_criteria``.

A chapter's title cell carries ``objective`` and ``objective_id`` (the id a learning path gives
it); its quiz cell names that id, so the quiz's mastery evidence is recorded under it.

A rebuild replaces only the cells of the chapters that changed. A cell the learner edited (its
source no longer hashes to ``written``) or added is never dropped: it stays with its chapter.
"""

from __future__ import annotations

import hashlib
from typing import Any

from deeptutor_jupyter.book.model import BuildState, Chapter
from deeptutor_jupyter.cells import NewCell, to_json

INTRO = "intro"


def written_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def _cell(book: str, chapter: str, block: str, cell: NewCell, extra: dict[str, Any]) -> NewCell:
    meta = {"book": book, "chapter": chapter, "block": block, "written": written_hash(cell.source)}
    cell.metadata = {**cell.metadata, "deeptutor": {**meta, **extra}}
    return cell


def intro_cells(state: BuildState, book: str) -> list[NewCell]:
    chapters = "\n".join(f"{n}. {p.title}" for n, p in enumerate(state.outline, 1))
    text = (
        f"# {state.topic}\n\nA study notebook written by DeepTutor from the course material "
        f"({', '.join(state.kbs) or 'no knowledge base'}), level: {state.level}.\n\n"
        f"{chapters}\n\nRun the examples; solve the cells tagged `exercise`, then ask "
        "`%tutor` to check your work."
    )
    return [_cell(book, INTRO, f"{INTRO}-0", NewCell(source=text), {})]


def chapter_cells(chapter: Chapter, number: int, book: str) -> list[NewCell]:
    from deeptutor_jupyter.learning.path import slug as objective_slug

    plan, cid = chapter.plan, chapter.plan.id
    # The id a learning path gives this objective (learning/path.py): the chapter's quiz
    # records mastery evidence under it, so %tutor progress and a path on the topic see it.
    objective = objective_slug(plan.title)
    out = [
        _cell(
            book,
            cid,
            f"{cid}-title",
            NewCell(source=f"## {number}. {plan.title}\n\n*Objective:* {plan.objective}"),
            {"objective": plan.objective, "objective_id": objective},
        )
    ]
    for index, block in enumerate(chapter.blocks):
        bid = block.block_id(cid, index)
        if block.kind == "text":
            out.append(_cell(book, cid, bid, NewCell(source=block.markdown), {}))
        elif block.kind == "example":
            out.append(_cell(book, cid, f"{bid}-words", NewCell(source=block.markdown), {}))
            code = NewCell(cell_type="code", source=block.code, tags=["example"])
            out.append(_cell(book, cid, bid, code, {}))
        elif block.kind == "exercise":
            words = f"**Exercise.** {block.markdown}"
            out.append(_cell(book, cid, f"{bid}-words", NewCell(source=words), {}))
            exercise: dict[str, Any] = {
                "hidden_tests": block.tests,
                "evaluation_criteria": block.evaluation_criteria,
            }
            if block.reference_solution:
                exercise["reference_solution"] = block.reference_solution
            starter = NewCell(cell_type="code", source=block.code, tags=["exercise"])
            out.append(_cell(book, cid, bid, starter, exercise))
        else:
            ask = f"%tutor Quiz me on {plan.title} (objective `{objective}`): {block.markdown}"
            out.append(_cell(book, cid, bid, NewCell(cell_type="code", source=ask), {}))
    if chapter.sources:
        listed = "\n".join(f"- {s.where()}" for s in chapter.sources)
        out.append(
            _cell(book, cid, f"{cid}-sources", NewCell(source=f"**Sources**\n\n{listed}"), {})
        )
    return out


def merge(
    existing: list[dict[str, Any]], fresh: dict[str, list[NewCell]], changed: set[str]
) -> list[dict[str, Any]]:
    """The notebook's cells after a rebuild: ``fresh`` holds every chapter's new cells in order
    (intro first); a chapter not in ``changed`` keeps its cells as they are."""
    segments: dict[str, list[dict[str, Any]]] = {}
    current = INTRO
    for cell in existing:
        chapter = _book_meta(cell).get("chapter")
        if isinstance(chapter, str):
            current = chapter
        segments.setdefault(current, []).append(cell)
    out: list[dict[str, Any]] = []
    for chapter, new in fresh.items():
        old = segments.pop(chapter, [])
        if old and chapter not in changed:
            out += old
            continue
        out += [to_json(c) for c in new]
        out += [c for c in old if _learners(c)]  # edited or added by the learner: kept
    for rest in segments.values():  # a chapter the new outline no longer has
        out += [c for c in rest if _learners(c)]
    return out


def _book_meta(cell: dict[str, Any]) -> dict[str, Any]:
    meta = (cell.get("metadata") or {}).get("deeptutor")
    return meta if isinstance(meta, dict) else {}


def _learners(cell: dict[str, Any]) -> bool:
    meta = _book_meta(cell)
    if "written" not in meta:
        return True
    source = cell.get("source", "")
    text = "".join(source) if isinstance(source, list) else str(source)
    return written_hash(text) != str(meta["written"])
