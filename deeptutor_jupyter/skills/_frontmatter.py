"""The front matter of a SKILL.md, read with a real YAML parser (PyYAML's safe loader).

Skills written for other agents use nested maps (``metadata: {author: ...}``), quoted strings,
block scalars and lists; a real parser reads them all. Only a mapping at the top is accepted, so
a malformed skill is reported and skipped rather than half understood.
"""

from __future__ import annotations

from typing import Any

from deeptutor_jupyter.errors import DeepTutorError


class FrontMatterError(DeepTutorError, ValueError):
    code = "skill_front_matter"


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter, body). Raises FrontMatterError when there is none or it is malformed."""
    import yaml  # only when skills are read, never at %load_ext

    text = text.lstrip("\ufeff")
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise FrontMatterError("SKILL.md does not start with a '---' front matter block")
    try:
        end = next(n for n in range(1, len(lines)) if lines[n].strip() == "---")
    except StopIteration:
        raise FrontMatterError("the front matter block is not closed with '---'") from None
    body = "\n".join(lines[end + 1 :]).strip("\n")
    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        raise FrontMatterError(f"cannot read the front matter{line}: {exc}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise FrontMatterError("the front matter must be 'key: value' lines")
    return {str(k): v for k, v in meta.items()}, body
