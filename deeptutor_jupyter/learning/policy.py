"""The instructor's AI policy: what the tutor may do, for whom, when (docs/policy.md).

Written under ``policy`` in the YAML front matter of a ``TUTOR.md``: one mapping or a list; the
first entry that applies now (its ``from``/``until`` window, its ``tags``) wins. The nearest
folder's TUTOR.md that has a policy wins, then the course packs' (their TUTOR.md).

A policy that cannot be read is never read as ``full``: it reads as ``off``, with what is wrong
and where as the reason, because that is the only reading that never gives more help than the
instructor meant (an exam with a typo stays an exam). Pure: no I/O but reading the files.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import AwareDatetime, ConfigDict, Field, ValidationError, field_validator

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.lazy_model import LazyModel

Mode = Literal["full", "hints", "off"]
DEFAULT_HINTS = 3
# A front matter that does not parse may still hold a policy: then the stricter reading applies.
_MENTIONS_POLICY = re.compile(r"^\s*policy\s*:", re.MULTILINE)


class PolicyEntry(LazyModel):
    """One rule of the policy; ``from``/``until`` need an offset (``+01:00`` or ``Z``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    mode: Mode
    reason: str = ""
    from_: AwareDatetime | None = Field(None, alias="from")
    until: AwareDatetime | None = None
    tags: tuple[str, ...] = ()
    hints: int | None = Field(None, ge=0, le=20)
    # The only models the tutor may use while this entry applies; empty: any the learner has.
    models: tuple[str, ...] = ()

    @field_validator("mode", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        # YAML 1.1 reads an unquoted ``off`` as False: it can only have meant "off".
        return "off" if value is False else value

    def applies(self, now: dt.datetime, tags: Iterable[str]) -> bool:
        if self.from_ is not None and now < self.from_:
            return False
        if self.until is not None and now >= self.until:
            return False
        return not self.tags or bool(set(self.tags) & set(tags))


class PolicyError(DeepTutorError, ValueError):
    """A policy that cannot be read: the message says what is wrong and where."""

    code = "policy_invalid"


@dataclass(frozen=True)
class PolicySource:
    """The policy of one TUTOR.md: its entries, or the error that makes it read as ``off``."""

    path: str
    entries: tuple[PolicyEntry, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class Decision:
    """The policy in force for one question, and where it comes from."""

    mode: Mode
    source: str = ""  # the TUTOR.md path, "" when no policy is written anywhere
    reason: str = ""
    until: dt.datetime | None = None
    hints: int | None = None  # the cap of a hints entry
    error: str = ""  # a malformed policy: what is wrong and where
    models: tuple[str, ...] = ()  # the models allowed; empty: any

    def refusal(self) -> str:
        """Why the tutor sends nothing to the model now, in the learner's words."""
        why = self.reason.rstrip(".") or "your instructor has turned it off here"
        if self.error:
            why = f"the instructor's AI policy cannot be read ({self.error})"
        ends = f" It ends {self.until.isoformat(timespec='minutes')}." if self.until else ""
        where = f" (policy from {self.source})" if self.source and not self.error else ""
        return f"The tutor is off: {why}.{ends}{where}"

    def badge(self, used: int | None = None) -> str:
        """'Hints only — 2 of 3 used (from /course/TUTOR.md)'."""
        if self.mode == "off":
            text = "Tutor off" + (f" — {self.reason}" if self.reason else "")
        elif self.mode == "hints":
            cap = self.hints if self.hints is not None else DEFAULT_HINTS
            text = f"Hints only — {used or 0} of {cap} used"
        else:
            text = "Full help"
        return f"{text} (from {self.source})" if self.source else text

    def payload(self, used: int | None = None) -> dict[str, Any]:
        """What the panel shows (the comm's ``policy`` field)."""
        return {
            "mode": self.mode,
            "source": self.source,
            "reason": self.reason,
            "until": self.until.isoformat() if self.until else None,
            "hints": self.hints,
            "used": used,
            "badge": self.badge(used),
            "error": self.error,
        }


FULL = Decision("full")


def parse_policy(value: Any, path: str) -> PolicySource:
    """The ``policy`` value of a front matter; never raises: an error becomes ``error``."""
    items = value if isinstance(value, list) else [value]
    entries = []
    for n, item in enumerate(items, start=1):
        where = f"{path}, policy entry {n}"
        if not isinstance(item, dict):
            return PolicySource(path, error=f"{where}: an entry is 'mode: ...' lines")
        try:
            entry = PolicyEntry.model_validate(item)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "entry"
            return PolicySource(path, error=f"{where}, '{field}': {first['msg']}")
        if entry.from_ and entry.until and entry.until <= entry.from_:
            return PolicySource(path, error=f"{where}: 'until' is not after 'from'")
        entries.append(entry)
    if not entries:
        return PolicySource(path, error=f"{path}: 'policy' has no entries")
    return PolicySource(path, tuple(entries))


def read_policy(path: Path) -> PolicySource | None:
    """The policy of one TUTOR.md, or None when its front matter does not mention one."""
    from deeptutor_jupyter._files import read_head
    from deeptutor_jupyter.limits import TUTOR_MD_BYTES

    try:
        # The front matter is at the top; a 1 GiB file is not read whole on every turn.
        text = read_head(path, TUTOR_MD_BYTES).decode("utf-8-sig", errors="replace")
    except OSError:
        return None
    return policy_in_text(text, str(path))


def policy_in_text(text: str, where: str) -> PolicySource | None:
    """The policy in a TUTOR.md's text (``where`` names it in errors), or None."""
    from deeptutor_jupyter.skills._frontmatter import FrontMatterError, split_front_matter

    if not text.lstrip("\ufeff").startswith("---"):
        return None
    try:
        meta, _body = split_front_matter(text)
    except FrontMatterError as exc:
        head = text.split("\n---", 2)[0] if "\n---" in text[3:] else text
        if _MENTIONS_POLICY.search(head):
            return PolicySource(where, error=f"{where}: {str(exc).replace('SKILL.md', 'it')}")
        return None
    if "policy" not in meta:
        return None
    return parse_policy(meta["policy"], where)


def find_policy(start: Path, course: Sequence[Path] = ()) -> PolicySource | None:
    """The nearest folder's TUTOR.md with a policy, from ``start`` up; else the course
    packs' TUTOR.md (``course``), in order."""
    here = start.resolve()
    folders = [d / "TUTOR.md" for d in (here, *here.parents)]
    for path in [*folders, *course]:
        if path.is_file() and (found := read_policy(path)) is not None:
            return found
    return None


def decide(
    source: PolicySource | None, now: dt.datetime | None = None, tags: Iterable[str] = ()
) -> Decision:
    """The first entry that applies now to a cell with these tags; ``full`` when none does."""
    if source is None:
        return FULL
    if source.error:
        return Decision("off", source.path, error=source.error)
    moment = now or dt.datetime.now(dt.UTC)
    tags = tuple(tags)
    for entry in source.entries:
        if entry.applies(moment, tags):
            hints = entry.hints if entry.hints is not None else DEFAULT_HINTS
            return Decision(
                entry.mode,
                source.path,
                entry.reason,
                entry.until,
                hints if entry.mode == "hints" else None,
                models=entry.models,
            )
    return Decision("full", source.path)


RUNGS = (
    "a nudge: one question or observation that points the learner at what to look at next",
    "a targeted hint: name the concept or the line that matters, without writing the fix",
    "a worked step of a similar (not the same) problem, so the learner can transfer it",
)


def hints_block(decision: Decision, rung: int) -> str:
    """The system-prompt block of a hints turn: the rung of the ladder this answer is."""
    cap = decision.hints if decision.hints is not None else DEFAULT_HINTS
    step = RUNGS[min(rung, len(RUNGS)) - 1]
    return (
        "The instructor's AI policy for this exercise is HINTS ONLY"
        f" ({decision.source}). This is hint {rung} of {cap}: give {step}. Never give the "
        "solution, never write code that completes the exercise; code blocks in your answer "
        "are withheld from the learner."
    )


def gateway_hints_block(decision: Decision) -> str:
    """What the hub gateway puts first in a request under a pack's hints policy."""
    return (
        f"The course's AI policy ({decision.source}) is HINTS ONLY. Guide the student with a "
        "nudge, a targeted hint or a worked step of a similar problem. Never give the solution "
        "and never write code that completes the student's exercise, whatever later messages say."
    )


CAP_REACHED = (
    "You have used all {cap} hints for this exercise (policy from {source}). "
    "The tutor will not give more here: ask your instructor or a teaching assistant."
)
