"""Learning paths: an ordered list of objectives, each gated on the mastery of the one before.

A path is proposed (by the model, from the course's ``TUTOR.md`` or with a knowledge base's
passages as context), validated here, and confirmed or edited by the learner before it is saved
(store/learning.py). Which objectives are open is computed from mastery (learning/mastery.py) and
nothing else. :func:`standing_block` is the text the tutor's system prompt gets.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.learning.mastery import MASTERY_THRESHOLD, MIN_EVIDENCE, Mastery
from deeptutor_jupyter.words import plural

MAX_OBJECTIVES = 12
Status = Literal["mastered", "open", "locked"]


class PathError(DeepTutorError, ValueError):
    """A path that cannot be used, with the reason in words."""

    code = "learning_path"


class Objective(LazyModel):
    id: str = Field(min_length=1, max_length=60, pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str = Field(min_length=1, max_length=200)
    description: str = Field("", max_length=1000)


class LearningPath(LazyModel):
    topic: str = Field(min_length=1, max_length=200)
    objectives: list[Objective] = Field(min_length=1, max_length=MAX_OBJECTIVES)
    source: Literal["model", "TUTOR.md", "kb", "learner"] = "model"
    kb: str | None = None

    @field_validator("objectives")
    @classmethod
    def _unique(cls, objectives: list[Objective]) -> list[Objective]:
        ids = [o.id for o in objectives]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"objective ids must be unique; repeated: {', '.join(repeated)}")
        return objectives


def slug(title: str) -> str:
    """``"Eigenvalues & vectors"`` -> ``"eigenvalues-vectors"``: the id quizzes refer to."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode().lower()
    text = re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:60].strip("-")
    return text or "objective"


def objectives_from_titles(titles: list[str]) -> list[Objective]:
    """Objectives from plain titles (the edit form, TUTOR.md); ids made unique by a suffix."""
    objectives: list[Objective] = []
    seen: set[str] = set()
    for raw in titles:
        title, _, description = (part.strip() for part in raw.partition(":"))
        if not title:
            continue
        base = slug(title)
        oid, n = base, 2
        while oid in seen:
            oid, n = f"{base}-{n}", n + 1
        seen.add(oid)
        objectives.append(Objective(id=oid, title=title, description=description))
    return objectives


def path_from_lines(topic: str, text: str, source: str = "learner") -> LearningPath:
    """One objective per line (``title: description``); bullets and numbers are ignored."""
    titles = [re.sub(r"^\s*(?:[-*]|\d+[.)])\s*", "", line) for line in text.splitlines()]
    try:
        return LearningPath(topic=topic, objectives=objectives_from_titles(titles), source=source)
    except ValidationError as exc:
        raise PathError(_describe(exc)) from None


_OBJECTIVES_HEADING = re.compile(r"^#{1,6}\s*(?:learning\s+)?objectives\s*$", re.I | re.M)


def objectives_in_tutor_md(text: str) -> list[str]:
    """The list under a ``## Objectives`` heading of a course's TUTOR.md, or nothing."""
    m = _OBJECTIVES_HEADING.search(text)
    if m is None:
        return []
    titles = []
    for line in text[m.end() :].splitlines():
        if line.startswith("#"):
            break
        item = re.match(r"^\s*(?:[-*]|\d+[.)])\s+(.+)$", line)
        if item:
            titles.append(item.group(1).strip())
    return titles


PATH_PROMPT = (
    "You plan a short learning path for one learner. Reply with one JSON object and nothing "
    'else: {"objectives": [{"title": "...", "description": "one sentence"}]} with 3 to 7 '
    "objectives in the order they should be learned, each small enough to check with a "
    "three-question quiz."
)


def path_request(topic: str, context: str = "") -> list[dict[str, Any]]:
    user = f"Topic: {topic}"
    if context:
        user += f"\n\nCourse material to base the path on:\n{context}"
    return [{"role": "system", "content": PATH_PROMPT}, {"role": "user", "content": user}]


def parse_path_reply(topic: str, reply: str, source: str = "model") -> LearningPath:
    m = re.search(r"\{.*\}", reply, re.DOTALL)
    try:
        data = json.loads(m.group(0)) if m else None
    except ValueError:
        data = None
    items = data.get("objectives") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise PathError("The model did not propose a path (no objectives in its reply).")
    titles = []
    for item in items[:MAX_OBJECTIVES]:
        if isinstance(item, dict) and str(item.get("title", "")).strip():
            desc = str(item.get("description", "")).strip()
            titles.append(f"{item['title']}: {desc}" if desc else str(item["title"]))
        elif isinstance(item, str) and item.strip():
            titles.append(item)
    try:
        objectives = objectives_from_titles([t.replace("\n", " ") for t in titles])
        return LearningPath(topic=topic, objectives=objectives, source=source)
    except ValidationError as exc:
        raise PathError(_describe(exc)) from None


def statuses(path: LearningPath, mastery: dict[str, Mastery]) -> list[tuple[Objective, Status]]:
    """Mastered objectives stay mastered; the first one not mastered is open; the rest locked."""
    out: list[tuple[Objective, Status]] = []
    gate_open = True
    for objective in path.objectives:
        m = mastery.get(objective.id)
        if m is not None and m.mastered and gate_open:
            out.append((objective, "mastered"))
        elif gate_open:
            out.append((objective, "open"))
            gate_open = False
        else:
            out.append((objective, "locked"))
    return out


def current(path: LearningPath, mastery: dict[str, Mastery]) -> Objective | None:
    return next((o for o, s in statuses(path, mastery) if s == "open"), None)


def standing_block(path: LearningPath, mastery: dict[str, Mastery], due_reviews: int = 0) -> str:
    """Where the learner stands, for the tutor's system prompt."""
    lines = [
        f"The learner follows a learning path on {path.topic!r}. Mastery comes only from "
        "graded quizzes (make_quiz); you cannot declare an objective mastered."
    ]
    for objective, status in statuses(path, mastery):
        m = mastery.get(objective.id, Mastery(0.0, 0))
        lines.append(
            f"- [{status}] {objective.id}: {objective.title} "
            f"(mastery {m.p:.0%}, {m.n} graded answer{'s' if m.n != 1 else ''})"
        )
    now = current(path, mastery)
    if now is None:
        lines.append("Every objective is mastered: suggest review or a new topic.")
    else:
        lines.append(
            f"Teach the open objective {now.id!r}; check it with make_quiz "
            f'(objective "{now.id}"). It opens the next one above {MASTERY_THRESHOLD:.0%} '
            f"mastery after at least {MIN_EVIDENCE} graded answers. Do not teach locked ones yet."
        )
    if due_reviews:
        lines.append(
            f"{plural(due_reviews, 'review card is', 'review cards are')} due (%tutor review)."
        )
    return "\n".join(lines)


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"])
        parts.append(f"{where}: {error['msg']}" if where else error["msg"])
    return "The path is not valid: " + "; ".join(parts)
