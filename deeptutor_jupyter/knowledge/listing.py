"""Which knowledge bases there are, without importing the index code when there are none.

Every turn asks (runtime/plan.py, runtime/choice.py); a learner with no knowledge base yet has
no ``kb`` folder, and the answer then costs one ``stat`` instead of importing the index and
ingest modules (~6 ms of a kernel's first request, issue 28).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["list_kbs"]


def list_kbs(home: Path) -> list[dict[str, Any]]:
    """``info()`` of every knowledge base under ``home/kb``, by name; damaged ones included.

    One ``stat`` per knowledge base when nothing changed: manifests are parsed again only
    when their stamp moves (``KnowledgeBase.info``).
    """
    base = Path(home).expanduser() / "kb"
    if not base.is_dir():
        return []
    from deeptutor_jupyter.knowledge.base import KnowledgeBase

    out = []
    for folder in sorted(base.iterdir()):
        try:
            kb = KnowledgeBase(home, folder.name)
        except ValueError:
            continue  # not one of ours (a trash folder being deleted, a stray file)
        if folder.is_dir():
            out.append(kb.info())
    return out
