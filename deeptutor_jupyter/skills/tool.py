"""``read_skill``: the one call between the model and a skill's full instructions."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.skills.library import (
    COURSE_DIR_ENV,
    Skill,
    SkillError,
    discover_skills,
    read_skill,
    user_skills_dir,
)
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolDeps, ToolResult

__all__ = ["ReadSkillArgs", "ReadSkillTool", "skills_for"]


class ReadSkillArgs(LazyModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="The skill's name as listed in the prompt.")
    file: str | None = Field(
        None, description="A file inside the skill's folder, e.g. 'references/rubric.md'."
    )


class ReadSkillTool(Tool[ReadSkillArgs]):
    name: ClassVar[str] = "read_skill"
    description: ClassVar[str] = (
        "Read the full instructions of a skill listed in the system prompt, or one of the "
        "skill's files. Read a skill before following it."
    )
    Args: ClassVar[type[BaseModel]] = ReadSkillArgs

    def __init__(self, cap: int = 8000) -> None:
        self.cap = cap

    async def run(self, args: ReadSkillArgs, ctx: ToolContext) -> ToolResult:
        try:
            text = read_skill(skills_for(ctx.deps), args.name, args.file, cap=self.cap)
        except (SkillError, OSError) as exc:
            return ToolResult(content=str(exc), is_error=True, summary=str(exc))
        where = f"{args.name}/{args.file}" if args.file else args.name
        return ToolResult(content=text, summary=f"read skill {where}", data={"skill": args.name})


def skills_for(deps: ToolDeps) -> Mapping[str, Skill]:
    """The turn's skills: ``deps.skills`` when the session put them there, else discovered
    from ``deps.home`` and ``DEEPTUTOR_COURSE_DIR``."""
    if deps.skills is not None:
        return dict(deps.skills)
    course = os.environ.get(COURSE_DIR_ENV, "").strip()
    home = deps.home
    return discover_skills(
        course_dir=Path(course).expanduser() if course else None,
        user_dir=user_skills_dir(Path(home)) if home is not None else None,
    )
