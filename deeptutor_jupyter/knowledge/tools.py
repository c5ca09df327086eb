"""``search_knowledge``: the model's way into the knowledge bases selected for a turn.

The session puts the selected names in ``ToolContext.deps.kbs`` and the learner's home in
``ToolContext.deps.home``. The result text numbers its sources ``[1]``, ``[2]``... so the model
can cite them; ``data["hits"]`` carries the same sources with links for the UI.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult
from deeptutor_jupyter.words import plural

if TYPE_CHECKING:
    from deeptutor_jupyter.knowledge.base import KnowledgeBase
    from deeptutor_jupyter.knowledge.model import Hit

__all__ = ["SearchKnowledgeArgs", "SearchKnowledgeTool", "format_hits"]

# Enough for the model to answer from; the whole chunk is one read away in the file itself.
EXCERPT_CHARS = 800


class SearchKnowledgeArgs(LazyModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1, description="What to look for, in the words the material would use."
    )
    kb: str | None = Field(
        None, description="Search only this knowledge base; omit to search all selected ones."
    )


class SearchKnowledgeTool(Tool[SearchKnowledgeArgs]):
    name: ClassVar[str] = "search_knowledge"
    description: ClassVar[str] = (
        "Search the learner's course material (notes, notebooks, PDFs) selected for this turn. "
        "Returns numbered passages with their source; cite them in the answer as [1], [2]."
    )
    Args: ClassVar[type[BaseModel]] = SearchKnowledgeArgs

    def __init__(self, k: int = 5) -> None:
        self.k = k
        # Loaded indexes stay in memory between calls; each checks its manifest for changes.
        self._open: dict[tuple[str, str], KnowledgeBase] = {}
        # turn id -> chunk id -> its [n]: a passage keeps its number across a turn's searches,
        # and new passages continue the count, so [n] is one passage in the whole answer.
        self._numbers: dict[str, dict[str, int]] = {}

    async def run(self, args: SearchKnowledgeArgs, ctx: ToolContext) -> ToolResult:
        # Here, not at import: every turn registers this tool, few search (issue 28).
        from deeptutor_jupyter.knowledge.model import KnowledgeIndexError

        selected, home = list(ctx.deps.kbs), ctx.deps.home
        if not selected or home is None:
            return _error("No knowledge base is selected for this turn.")
        if args.kb is not None and args.kb not in selected:
            return _error(f"Unknown knowledge base {args.kb!r}; selected: {', '.join(selected)}")
        names = [args.kb] if args.kb is not None else selected
        try:
            hits = await asyncio.to_thread(self._search, Path(home), names, args.query)
        except (KnowledgeIndexError, ValueError) as exc:
            return _error(str(exc))
        numbers = self._number(ctx.turn_id, hits)
        content = format_hits(args.query, hits, numbers)
        rows = [
            {
                **h.source(),
                "n": n,
                "title": h.chunk.title,
                # The kernel makes links relative to the notebook (kernel/turn_plan.py); the
                # path here is the knowledge base's, with the fragment that opens the place.
                "link": h.link(),
                "path": str(Path(h.root, h.chunk.path)) if h.root else h.chunk.path,
            }
            for h, n in zip(hits, numbers, strict=True)
        ]
        data = {"hits": rows}
        summary = f"{plural(len(hits), 'passage', 'passages')} from {', '.join(names)}"
        return ToolResult(content=content, data=data, summary=summary)

    def _number(self, turn_id: str, hits: list[Hit]) -> list[int]:
        seen = self._numbers.setdefault(turn_id, {})
        while len(self._numbers) > 32:  # only the latest turns search again
            del self._numbers[next(iter(self._numbers))]
        for hit in hits:
            seen.setdefault(hit.chunk.chunk_id, len(seen) + 1)
        return [seen[hit.chunk.chunk_id] for hit in hits]

    def _search(self, home: Path, names: list[str], query: str) -> list[Hit]:
        from deeptutor_jupyter.knowledge.base import KnowledgeBase  # not at a turn's start

        hits: list[Hit] = []
        for name in names:
            kb = self._open.setdefault((str(home), name), KnowledgeBase(home, name))
            hits += kb.search(query, self.k)
        # BM25 scores of different indexes are only roughly comparable; good enough to merge.
        return sorted(hits, key=lambda h: h.score, reverse=True)[: self.k]


def format_hits(query: str, hits: list[Hit], numbers: list[int] | None = None) -> str:
    """The compact text the model reads: one numbered block per passage."""
    if not hits:
        return f"No passage matches {query!r}. Try other words, or answer without the material."
    blocks = []
    for n, hit in zip(numbers or range(1, len(hits) + 1), hits, strict=True):
        c = hit.chunk
        where = [c.path]
        if c.cell is not None:
            where.append(f"cell {c.cell + 1}")  # counted from 1 for people; data keeps 0-based
        if c.page is not None:
            where.append(f"page {c.page}")
        if c.line is not None:
            where.append(f"line {c.line}")
        text = c.text if len(c.text) <= EXCERPT_CHARS else c.text[:EXCERPT_CHARS] + " …"
        head = f"[{n}] {', '.join(where)} — {c.title} (kb {c.kb}, score {hit.score:.2f})"
        blocks.append(f"{head}\n{text}")
    return "Cite these sources as [n] where you use them.\n\n" + "\n\n".join(blocks)


def _error(message: str) -> ToolResult:
    data: dict[str, Any] = {"hits": []}
    return ToolResult(content=message, is_error=True, data=data, summary=message)
