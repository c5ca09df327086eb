"""How a turn's sources read in the cell: numbered links that open the file in JupyterLab."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def source_links(hits: list[dict[str, Any]], cwd: Path) -> list[tuple[str, str]]:
    """(label, link) per cited passage; links are relative to the notebook so JupyterLab opens
    the file itself (at the cell or page when the fragment says so)."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for hit in hits:
        key = str(hit.get("chunk_id"))
        if key in seen:
            continue
        seen.add(key)
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
        link = rel.replace(" ", "%20") + (f"#{fragment}" if fragment else "")
        out.append((", ".join(where), link))
    return out


def sources_markdown(links: list[tuple[str, str]]) -> str:
    if not links:
        return ""
    rows = [f"{n}. [{label}]({link})" for n, (label, link) in enumerate(links, start=1)]
    return "**Sources**\n\n" + "\n".join(rows)
