"""A group's AI policy set by an instructor (the page's form, ``deeptutor-jupyter course policy``),
kept in the service's database with an audit log of every change (who, when, old → new).

A group with a policy set here follows it instead of its packs' TUTOR.md policies: it is the
instructor's latest word (an exam that starts now). Clearing it gives the packs' policies back.
The text is the YAML of a TUTOR.md's ``policy`` value (one mapping or a list), read by
learning/policy.py; a policy that cannot be read is refused, with what is wrong and where.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from deeptutor_jupyter.hub.packs import GROUP_RE
from deeptutor_jupyter.hub.quota import Clock, metadata, utc_now
from deeptutor_jupyter.learning.policy import PolicyError, PolicySource, parse_policy

MAX_POLICY_CHARS = 10_000
AUDIT_SHOWN = 50

group_policies = sa.Table(
    "deeptutor_group_policy",
    metadata,
    sa.Column("grp", sa.String(255), primary_key=True),
    sa.Column("policy", sa.Text, nullable=False),
    sa.Column("set_by", sa.String(255), nullable=False),
    sa.Column("set_at", sa.String(32), nullable=False),
)
policy_audit = sa.Table(
    "deeptutor_policy_audit",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.String(32), nullable=False),
    sa.Column("who", sa.String(255), nullable=False),
    sa.Column("grp", sa.String(255), nullable=False),
    sa.Column("old", sa.Text, nullable=False),  # "" when none was set
    sa.Column("new", sa.Text, nullable=False),  # "" when cleared
)


@dataclass(frozen=True)
class AuditRow:
    at: str
    who: str
    group: str
    old: str
    new: str


def where(group: str) -> str:
    """How a group's policy is named in the learner's and the instructor's words."""
    return f"group {group}'s policy on the course service"


def read_group_policy(group: str, text: str) -> PolicySource:
    """The policy in ``text`` for ``group``; PolicyError with what is wrong and where."""
    import yaml

    if not GROUP_RE.match(group):
        raise PolicyError(f"{group!r} is not a hub group name.")
    if len(text) > MAX_POLICY_CHARS:
        raise PolicyError(f"The policy is longer than {MAX_POLICY_CHARS} characters.")
    try:
        value: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError(f"{where(group)}: the YAML does not parse ({exc})") from None
    if isinstance(value, dict) and set(value) == {"policy"}:
        value = value["policy"]  # a TUTOR.md's front matter, pasted whole
    source = parse_policy(value, where(group))
    if source.error:
        raise PolicyError(f"The AI policy cannot be read: {source.error}")
    return source


class GroupPolicyStore:
    def __init__(self, engine: sa.Engine, clock: Clock = utc_now) -> None:
        self.engine, self.clock = engine, clock
        metadata.create_all(engine, tables=[group_policies, policy_audit])

    def set(self, group: str, text: str | None, by: str) -> None:
        """Set (``text``) or clear (None) a group's policy, and log the change; raises
        PolicyError, changing nothing, when the text cannot be read."""
        if text is not None:
            read_group_policy(group, text)
        stamp = self.clock().isoformat(timespec="seconds")
        with self.engine.begin() as conn:
            old = self._text(conn, group)
            if old == (text or ""):
                return  # the same policy again is not a change
            conn.execute(group_policies.delete().where(group_policies.c.grp == group))
            if text is not None:
                conn.execute(
                    group_policies.insert().values(grp=group, policy=text, set_by=by, set_at=stamp)
                )
            conn.execute(
                policy_audit.insert().values(at=stamp, who=by, grp=group, old=old, new=text or "")
            )

    def text(self, group: str) -> str:
        with self.engine.connect() as conn:
            return self._text(conn, group)

    @staticmethod
    def _text(conn: sa.Connection, group: str) -> str:
        row = conn.execute(
            sa.select(group_policies.c.policy).where(group_policies.c.grp == group)
        ).first()
        return str(row.policy) if row is not None else ""

    def all(self) -> dict[str, str]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(group_policies.c.grp, group_policies.c.policy)).all()
        return {r.grp: r.policy for r in rows}

    def for_groups(self, groups: tuple[str, ...]) -> list[PolicySource]:
        """The policies set for these groups (read again: the text was checked when set)."""
        texts = self.all()
        found = []
        for group in sorted(set(groups) & set(texts)):
            try:
                found.append(read_group_policy(group, texts[group]))
            except PolicyError as exc:  # pragma: no cover - checked when set
                found.append(PolicySource(where(group), error=str(exc)))
        return found

    def audit(self, group: str | None = None, limit: int = AUDIT_SHOWN) -> list[AuditRow]:
        query = sa.select(policy_audit).order_by(policy_audit.c.id.desc()).limit(limit)
        if group is not None:
            query = query.where(policy_audit.c.grp == group)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [AuditRow(r.at, r.who, r.grp, r.old, r.new) for r in rows]
