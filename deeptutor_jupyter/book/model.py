"""What a study notebook is made of, and where its build stands (saved after every step).

``BuildState`` is the resumable build: the outline (ideation), each chapter's sources with
their fingerprint, each chapter's blocks once written, and whether they were compiled
(examples run, exercises verified). A build stopped anywhere resumes from this state; a rebuild
compares fingerprints and rewrites only the chapters whose sources changed.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from pydantic import Field

from deeptutor_jupyter.lazy_model import LazyModel

STAGES = ("ideation", "sources", "spine", "pages", "compile")


class SourceRef(LazyModel):
    """A passage of the course's material a chapter cites as ``[n]``."""

    n: int
    kb: str
    file: str
    cell: int | None = None
    page: int | None = None
    line: int | None = None
    text: str = ""

    def where(self) -> str:
        place = (
            f", cell {self.cell}"
            if self.cell is not None
            else f", page {self.page}"
            if self.page is not None
            else f", line {self.line}"
            if self.line is not None
            else ""
        )
        return f"[{self.n}] `{self.file}`{place} ({self.kb})"


class ChapterPlan(LazyModel):
    """One chapter of the outline: the model's ideation."""

    id: str = ""
    title: str = Field(min_length=1, max_length=200)
    objective: str = Field("", max_length=400, description="What the learner can do after it.")
    query: str = Field("", max_length=200, description="What to search the course material for.")


class Block(LazyModel):
    """One piece of a chapter: text, a worked example, an exercise or the chapter's quiz."""

    kind: Literal["text", "example", "exercise", "quiz"]
    markdown: str = ""  # text (Markdown, LaTeX, [n] citations); an example's or exercise's words
    code: str = ""  # an example's code; an exercise's starter
    reference_solution: str = ""  # exercise only
    tests: str = ""  # exercise only: asserts, hidden from the learner (cell metadata)
    evaluation_criteria: list[str] = Field(default_factory=list)  # exercise only

    def block_id(self, chapter: str, index: int) -> str:
        return f"{chapter}-{index}-{self.kind}"


class Chapter(LazyModel):
    plan: ChapterPlan
    sources: list[SourceRef] = Field(default_factory=list)
    fingerprint: str = ""  # of the sources it was written from
    blocks: list[Block] = Field(default_factory=list)
    written: bool = False  # pages stage done for this fingerprint
    compiled: bool = False  # examples run, exercises verified, citations checked
    in_notebook: bool = False  # these blocks are in the notebook
    notes: list[str] = Field(default_factory=list)  # what compile dropped or repaired, and why


class BuildState(LazyModel):
    topic: str
    level: str = "beginner"
    language: str = "en"
    kbs: list[str] = Field(default_factory=list)
    hints: bool = False  # the instructor's policy is hints: the book holds no solutions
    notebook: str = ""  # where the book is written
    outline: list[ChapterPlan] = Field(default_factory=list)
    chapters: dict[str, Chapter] = Field(default_factory=dict)
    stage: str = "ideation"  # the stage the build is at (or "done")


def slug(topic: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", topic.lower()).strip("-")[:48].strip("-")
    return words or "book"


def fingerprint(sources: list[SourceRef]) -> str:
    digest = hashlib.sha256()
    for ref in sources:
        digest.update(f"{ref.kb}\0{ref.file}\0{ref.cell}\0{ref.page}\0{ref.text}\0".encode())
    return digest.hexdigest()[:16]
