"""``read_memory`` and ``write_memory``: the agent loop's view of the learner's memory.

The store arrives as ``ctx.deps.memory`` and the current turn's trace id as
``ctx.deps.trace_id`` (the session injects both), so a preference the model saves cites the
turn in which the learner expressed it.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.memory.document import MAX_TEXT
from deeptutor_jupyter.memory.store import MemoryStore
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult

_NO_STORE = "Memory is not available in this session."


def _store(ctx: ToolContext) -> MemoryStore | None:
    return ctx.deps.memory


class ReadMemoryArgs(LazyModel):
    pass


class ReadMemoryTool(Tool[ReadMemoryArgs]):
    name: ClassVar[str] = "read_memory"
    description: ClassVar[str] = (
        "Read what is remembered about the learner across sessions: recent work, profile, "
        "scope of study and stated preferences (each line ends with its id, m_...)."
    )
    Args: ClassVar[type[BaseModel]] = ReadMemoryArgs

    async def run(self, args: ReadMemoryArgs, ctx: ToolContext) -> ToolResult:
        store = _store(ctx)
        if store is None:
            return ToolResult(content=_NO_STORE, is_error=True, summary=_NO_STORE)
        text = store.read_l3_concat()
        return ToolResult(content=text, summary="Read the learner's memory")


class WriteMemoryArgs(LazyModel):
    op: Literal["add", "edit"] = Field(
        description="add a new preference, or edit the one named by entry_id"
    )
    text: str = Field(
        min_length=1,
        max_length=MAX_TEXT,
        description="the preference as one plain line, e.g. 'Prefers short answers in French'",
    )
    entry_id: str | None = Field(
        default=None, description="for edit: the id of the line to change (m_...)"
    )


class WriteMemoryTool(Tool[WriteMemoryArgs]):
    name: ClassVar[str] = "write_memory"
    description: ClassVar[str] = (
        "Save a lasting preference the learner stated (language, pace, format, goals) to their "
        "preferences. Saving the same preference twice is harmless: it is reported as already "
        "saved. Use edit with entry_id to change a saved one."
    )
    Args: ClassVar[type[BaseModel]] = WriteMemoryArgs

    async def run(self, args: WriteMemoryArgs, ctx: ToolContext) -> ToolResult:
        store = _store(ctx)
        if store is None:
            return ToolResult(content=_NO_STORE, is_error=True, summary=_NO_STORE)
        if args.op == "edit" and not args.entry_id:
            return _error("edit needs entry_id: the m_... id shown by read_memory")
        trace_id = ctx.deps.trace_id or ctx.turn_id
        try:
            result = store.write_preference(
                args.op, args.text, trace_id=trace_id, entry_id=args.entry_id
            )
        except (KeyError, ValueError) as exc:
            return _error(str(exc).strip("'\""))
        messages = {
            "added": f"Saved to preferences (m_{result.entry_id}).",
            "edited": f"Updated preference m_{result.entry_id}.",
            "duplicate": f"Already saved as m_{result.entry_id}; nothing was added.",
        }
        message = messages[result.status]
        data = {"status": result.status, "entry_id": f"m_{result.entry_id}"}
        return ToolResult(content=message, data=data, summary=message)


def _error(message: str) -> ToolResult:
    return ToolResult(content=message, is_error=True, summary=message)
