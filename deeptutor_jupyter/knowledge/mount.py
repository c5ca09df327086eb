"""Which tools a turn mounts: one table, decided from the turn's situation, then the switches.

The tool surface is a function of the learning situation (is a knowledge base selected, are
there skills, deferred tools), not only of permissions: a schema the model cannot use costs
tokens and invites wrong calls, which weak models measurably suffer from. Every conditional
tool is listed in ``CONDITIONAL_MOUNTS`` and nowhere else, so what the docs say and what the
kernel mounts cannot drift apart.

Order of decisions:

1. ``always`` tools (e.g. ``ask_user``, ``calculate``), in the order given;
2. conditional tools from ``CONDITIONAL_MOUNTS``, in table order, when their flag is set;
3. ``--tools a,b`` keeps only the named ones among those (a name that is not available is not
   added: the switch restricts, it never grants);
4. ``--no-tools`` empties the list, whatever else is set.

Attachments mount nothing here: they are read by the explore pass before the answer loop, so
the answering model gets their digest, not a file-reading tool.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["CONDITIONAL_MOUNTS", "MountContext", "mounted_tools"]


@dataclass(frozen=True)
class MountContext:
    """The facts about a turn that decide its tools."""

    has_kb: bool = False
    has_attachments: bool = False
    has_skills: bool = False
    has_deferred: bool = False
    user_tools: tuple[str, ...] | None = None  # from --tools; None when not given
    no_tools: bool = False  # from --no-tools


# (MountContext flag, tool it mounts). has_attachments deliberately has no row: see above.
CONDITIONAL_MOUNTS: tuple[tuple[str, str], ...] = (
    ("has_kb", "search_knowledge"),
    ("has_skills", "read_skill"),
    ("has_deferred", "load_tools"),
)


def mounted_tools(ctx: MountContext, *, always: Iterable[str]) -> list[str]:
    """The tool names to send for this turn, in a stable order, without duplicates."""
    if ctx.no_tools:
        return []
    names = list(always)
    names += [tool for flag, tool in CONDITIONAL_MOUNTS if getattr(ctx, flag)]
    names = list(dict.fromkeys(names))
    if ctx.user_tools is not None:
        wanted = set(ctx.user_tools)
        names = [name for name in names if name in wanted]
    return names
