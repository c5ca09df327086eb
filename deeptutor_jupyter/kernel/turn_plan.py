"""How a turn's sources read in the cell: numbered links that open the file in JupyterLab, only
the passages the answer cites, each ``[n]`` a link."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any


def source_links(hits: list[dict[str, Any]], cwd: Path) -> list[tuple[str, str]]:
    """(label, link) per passage, in the order of their ``[n]``: the n-th entry is ``[n]``.

    Links are relative to the notebook so JupyterLab opens the file itself (at the cell or page
    when the fragment says so). Two passages of one file differ by cell, page or section title.
    """
    numbered: dict[int, tuple[str, str]] = {}
    for position, hit in enumerate(_unique(hits), start=1):
        number = int(hit.get("n") or position)
        if number in numbered:
            continue
        path = Path(str(hit.get("path") or hit.get("file", "")))
        try:
            rel = os.path.relpath(path, cwd) if path.is_absolute() else str(path)
        except ValueError:
            rel = str(path)
        fragment = str(hit.get("link", "")).partition("#")[2]
        where = [str(hit.get("file", ""))]
        if hit.get("cell") is not None:
            where.append(f"cell {int(hit['cell']) + 1}")
        if hit.get("page") is not None:
            where.append(f"page {hit['page']}")
        label = ", ".join(where)
        if hit.get("title"):
            label += f" · {hit['title']}"
        link = rel.replace(" ", "%20") + (f"#{fragment}" if fragment else "")
        numbered[number] = (label, link)
    labels = [label for label, _ in numbered.values()]
    return [
        (label if labels.count(label) == 1 else f"{label} (passage {n})", link)
        for n, (label, link) in sorted(numbered.items())
    ]


def _unique(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    out = []
    for hit in hits:
        key = str(hit.get("chunk_id"))
        if key not in seen:
            seen.add(key)
            out.append(hit)
    return out


_MARKER = re.compile(r"\[(\d{1,3})\](?!\()")


def cited_numbers(answer: str) -> set[int]:
    """The ``[n]`` markers an answer uses (not ``[text](link)`` links)."""
    return {int(m.group(1)) for m in _MARKER.finditer(answer)}


def sources_markdown(links: list[tuple[str, str]], answer: str | None = None) -> str:
    """The sources under an answer; with ``answer``, only the passages it cites.

    The ``[n]: link`` definitions at the end make every ``[n]`` of the answer a link when both
    are one Markdown document (the saved notebook, and the view: see TurnView.show_sources).
    An answer that cites nothing keeps the whole list, under a heading that says so.
    """
    if not links:
        return ""
    numbered = list(enumerate(links, start=1))
    heading = "**Sources**"
    if answer is not None:
        cited = cited_numbers(answer)
        if cited & {n for n, _ in numbered}:
            numbered = [(n, pair) for n, pair in numbered if n in cited]
        else:
            heading = "**Passages the tutor read** (none cited)"
    rows = [f"- **[{n}]** [{label}]({link})" for n, (label, link) in numbered]
    definitions = [f"[{n}]: <{link}>" for n, (_, link) in numbered]
    return heading + "\n\n" + "\n".join(rows) + "\n\n" + "\n".join(definitions)
