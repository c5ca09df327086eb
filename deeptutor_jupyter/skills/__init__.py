"""Skills: SKILL.md folders in three layers (built-in < course < user), read on demand.

``ReadSkillTool`` is imported lazily (it brings in pydantic and the tool base), so listing
skills for a prompt stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deeptutor_jupyter.lazy_names import lazy_names
from deeptutor_jupyter.skills.library import (
    BUILTIN_DIR,
    COURSE_DIR_ENV,
    Skill,
    SkillError,
    SkillScan,
    always_blocks,
    discover_skills,
    read_skill,
    scan_skills,
    skills_manifest,
    user_skills_dir,
)

if TYPE_CHECKING:
    from deeptutor_jupyter.skills.tool import ReadSkillTool

__all__ = [
    "BUILTIN_DIR",
    "COURSE_DIR_ENV",
    "ReadSkillTool",
    "Skill",
    "SkillError",
    "SkillScan",
    "always_blocks",
    "discover_skills",
    "read_skill",
    "scan_skills",
    "skills_manifest",
    "user_skills_dir",
]


__getattr__ = lazy_names(__name__, {"ReadSkillTool": "tool"})
