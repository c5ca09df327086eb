"""Counts in words a learner reads: ``1 card``, ``3 cards``, never an s in brackets."""

from __future__ import annotations


def plural(count: int, one: str, many: str) -> str:
    """``1 entry``, ``2 entries``: the count and the word that agrees with it."""
    return f"{count} {one if count == 1 else many}"
