"""Skills: folders with a SKILL.md, disclosed progressively to the model.

The system prompt carries one line per skill (``skills_manifest``); the model reads a skill's
body with ``read_skill`` when a task matches it. Only skills marked ``always: true`` have their
body injected into every turn (house rules). Three layers, each shadowing the one before by
name: built-in (shipped in ``deeptutor_jupyter/skills/builtin``, read-only) < course
(``DEEPTUTOR_COURSE_DIR``) < user (``$DEEPTUTOR_HOME/skills``).

A skill folder may hold more files (``references/``, examples); ``read_skill(name, file)`` reads
them, and refuses any path that leaves the skill's folder: ``..``, absolute paths, and symlinks
that point outside.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.skills._frontmatter import FrontMatterError, split_front_matter

__all__ = [
    "BUILTIN_DIR",
    "COURSE_DIR_ENV",
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

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
COURSE_DIR_ENV = "DEEPTUTOR_COURSE_DIR"
SKILL_FILE = "SKILL.md"
LAYERS = ("builtin", "course", "user")
# Descriptions are cut in the manifest: it is sent every turn, a skill's body only on demand.
MANIFEST_DESCRIPTION_CHARS = 200
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


class SkillError(DeepTutorError, ValueError):
    code = "skill"

    """A read_skill request that cannot be served; the message is meant for the model."""


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    tags: tuple[str, ...]
    always: bool
    root: Path  # the skill's folder
    layer: str  # "builtin" | "course" | "user"


@dataclass
class SkillScan:
    """What discovery found: the effective skills by name, and why others were skipped."""

    skills: dict[str, Skill] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    shadowed: list[Skill] = field(default_factory=list)  # hidden by a later layer


def user_skills_dir(home: Path) -> Path:
    return Path(home).expanduser() / "skills"


def scan_skills(
    *,
    course_dir: Path | Sequence[Path] | None,
    user_dir: Path | None,
    builtin_dir: Path | None = BUILTIN_DIR,
) -> SkillScan:
    """Discover all layers; a skill that cannot be read becomes a warning, never an error.

    ``course_dir`` may be several folders (a course's packs), later ones shadowing earlier.
    """
    scan = SkillScan()
    courses = [course_dir] if isinstance(course_dir, Path | str) else list(course_dir or [])
    layered = [("builtin", builtin_dir), *(("course", c) for c in courses), ("user", user_dir)]
    for layer, folder in layered:
        if folder is None or not Path(folder).is_dir():
            continue
        for skill_dir in sorted(Path(folder).iterdir()):
            if skill_dir.name.startswith(".") or not (skill_dir / SKILL_FILE).is_file():
                continue
            try:
                skill = _load(skill_dir, layer)
            except (FrontMatterError, OSError, UnicodeDecodeError) as exc:
                scan.warnings.append(f"skill {skill_dir} skipped: {exc}")
                continue
            if skill.name in scan.skills:
                scan.shadowed.append(scan.skills[skill.name])
            scan.skills[skill.name] = skill
    return scan


def discover_skills(
    *, course_dir: Path | Sequence[Path] | None, user_dir: Path | None
) -> dict[str, Skill]:
    """The effective skills by name; see ``scan_skills`` for the warnings."""
    return scan_skills(course_dir=course_dir, user_dir=user_dir).skills


def _load(skill_dir: Path, layer: str) -> Skill:
    meta, _body = split_front_matter((skill_dir / SKILL_FILE).read_text(encoding="utf-8"))
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise FrontMatterError("'name' is missing or not 1-64 letters, digits, '-' or '_'")
    if not isinstance(description, str) or not description.strip():
        raise FrontMatterError("'description' is missing")
    tags = meta.get("tags", [])
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    always = meta.get("always", False)
    if not isinstance(always, bool):
        raise FrontMatterError("'always' must be true or false")
    if not isinstance(tags, list):
        raise FrontMatterError("'tags' must be a list")
    return Skill(name, " ".join(description.split()), tuple(tags), always, skill_dir, layer)


def skills_manifest(skills: Mapping[str, Skill]) -> str:
    """One line per skill for the system prompt, sorted by name; "" when there are none."""
    lines = []
    for skill in sorted(skills.values(), key=lambda s: s.name):
        text = skill.description
        if len(text) > MANIFEST_DESCRIPTION_CHARS:
            text = text[: MANIFEST_DESCRIPTION_CHARS - 1].rstrip() + "…"
        tags = f" [{', '.join(skill.tags)}]" if skill.tags else ""
        mark = " (always on)" if skill.always else ""
        lines.append(f"- {skill.name}: {text}{tags}{mark}")
    return "\n".join(lines)


def always_blocks(skills: Mapping[str, Skill], cap: int = 4000) -> list[str]:
    """The bodies of ``always: true`` skills, each cut to ``cap`` characters, by name."""
    blocks = []
    for skill in sorted(skills.values(), key=lambda s: s.name):
        if skill.always:
            body = _body(skill)
            blocks.append(f"## Skill: {skill.name}\n\n{_capped(body, cap, skill.name, None)}")
    return blocks


def read_skill(
    skills: Mapping[str, Skill], name: str, file: str | None = None, cap: int = 8000
) -> str:
    """A skill's body (or one of its files), at most ``cap`` characters.

    Without ``file`` the body of SKILL.md comes back with the list of the skill's other files,
    so the model knows what else it may read.
    """
    skill = skills.get(name)
    if skill is None:
        known = ", ".join(sorted(skills)) or "none"
        raise SkillError(f"Unknown skill {name!r}. Available skills: {known}")
    if file is None or file.strip() in ("", SKILL_FILE):
        text = _body(skill)
        others = _other_files(skill)
        if others:
            text += "\n\nOther files in this skill (read_skill with file=...): " + ", ".join(others)
        return _capped(text, cap, name, None)
    target = _inside(skill, file)
    try:
        text = target.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SkillError(f"{file!r} in skill {name!r} is not a text file") from None
    return _capped(text, cap, name, file)


def _body(skill: Skill) -> str:
    return split_front_matter((skill.root / SKILL_FILE).read_text(encoding="utf-8"))[1]


def _inside(skill: Skill, file: str) -> Path:
    """The file's real path, if it is a regular file inside the skill's folder."""
    if (
        PurePosixPath(file).is_absolute()
        or PureWindowsPath(file).is_absolute()
        or PureWindowsPath(file).drive
        or ".." in re.split(r"[\\/]", file)
    ):
        raise SkillError(f"Refused {file!r}: give a path inside the skill {skill.name!r}")
    root = skill.root.resolve()
    target = (root / file).resolve()  # resolve() follows symlinks, so a link out is caught here
    if not target.is_relative_to(root):
        raise SkillError(f"Refused {file!r}: it points outside the skill {skill.name!r}")
    if not target.is_file():
        raise SkillError(f"No file {file!r} in skill {skill.name!r}")
    return target


def _other_files(skill: Skill) -> list[str]:
    root = skill.root
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            rel = (Path(dirpath) / filename).relative_to(root).as_posix()
            if rel != SKILL_FILE and not filename.startswith("."):
                found.append(rel)
    return found[:50]


def _capped(text: str, cap: int, name: str, file: str | None) -> str:
    if len(text) <= cap:
        return text
    what = f"{file!r} of skill {name!r}" if file else f"skill {name!r}"
    return text[:cap] + f"\n\n[… {what} cut at {cap} of {len(text)} characters]"
