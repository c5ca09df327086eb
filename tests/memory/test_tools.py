"""read_memory / write_memory through the tool registry, as the agent loop calls them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import deeptutor_jupyter.memory as memory
from deeptutor_jupyter.memory import EMPTY_MEMORY, MemoryStore
from deeptutor_jupyter.memory.tools import ReadMemoryTool, WriteMemoryTool
from deeptutor_jupyter.providers.base import ToolCall
from deeptutor_jupyter.tools.base import ToolContext, ToolDeps
from deeptutor_jupyter.tools.registry import ToolRegistry


def context(store: MemoryStore | None, tmp_path: Path) -> ToolContext:
    deps = ToolDeps(memory=store, trace_id="t_turn") if store is not None else ToolDeps()
    return ToolContext(session_id="s", turn_id="u", workspace=tmp_path, deps=deps)


def call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=json.dumps(arguments))


async def test_read_memory_says_when_nothing_is_remembered(
    store: MemoryStore, tmp_path: Path
) -> None:
    registry = ToolRegistry([ReadMemoryTool(), WriteMemoryTool()])
    result = await registry.execute(call("read_memory"), context(store, tmp_path))
    assert result.content == EMPTY_MEMORY and not result.is_error


async def test_write_memory_adds_once_then_reports_already_saved(
    store: MemoryStore, tmp_path: Path
) -> None:
    registry = ToolRegistry([ReadMemoryTool(), WriteMemoryTool()])
    ctx = context(store, tmp_path)
    first = await registry.execute(call("write_memory", op="add", text="Explain in French"), ctx)
    again = await registry.execute(call("write_memory", op="add", text="explain in french!"), ctx)
    assert first.content.startswith("Saved to preferences (m_")
    assert again.content.startswith("Already saved as m_") and not again.is_error
    assert again.data is not None and first.data == {**again.data, "status": "added"}
    ((_, entry),) = store.read("L3", "preferences").entries()
    assert entry.refs == ["t_turn"]  # the runtime's trace id, not one the model made up
    read = await registry.execute(call("read_memory"), ctx)
    assert "Explain in French [^1]" in read.content


async def test_write_memory_edit(store: MemoryStore, tmp_path: Path) -> None:
    registry = ToolRegistry([WriteMemoryTool()])
    ctx = context(store, tmp_path)
    added = store.write_preference("add", "Short answers", trace_id="t_0")
    edited = await registry.execute(
        call("write_memory", op="edit", text="Very short answers", entry_id=f"m_{added.entry_id}"),
        ctx,
    )
    assert edited.content == f"Updated preference m_{added.entry_id}."
    missing = await registry.execute(call("write_memory", op="edit", text="x"), ctx)
    assert missing.is_error and "entry_id" in missing.content
    unknown = await registry.execute(
        call("write_memory", op="edit", text="x", entry_id="m_nope"), ctx
    )
    assert unknown.is_error and "No preference with id" in unknown.content
    too_long = await registry.execute(call("write_memory", op="add", text="x" * 241), ctx)
    assert too_long.is_error and "240" in too_long.content


async def test_tools_without_a_store_explain(tmp_path: Path) -> None:
    registry = ToolRegistry([ReadMemoryTool(), WriteMemoryTool()])
    result = await registry.execute(call("read_memory"), context(None, tmp_path))
    assert result.is_error and "not available" in result.content


def test_write_memory_schema_is_derived() -> None:
    params = WriteMemoryTool.schema()["function"]["parameters"]
    assert params["properties"]["op"]["enum"] == ["add", "edit"]
    assert params["properties"]["text"]["maxLength"] == 240


def test_public_names() -> None:
    assert sorted(memory.__all__) == sorted(
        [
            "DELETE_REASONS", "EMPTY_MEMORY", "L3_KEYS", "MAX_TEXT", "SURFACES", "TRACE_MIME",
            "AddOp", "DeleteOp", "Document", "DocumentError", "EditOp", "Entry", "ImportResult",
            "MemoryStore", "OpsPreview", "Section", "TraceRecord", "WriteResult",
            "new_trace_id", "normalise", "parse", "render", "summarize_answer",
        ]
    )  # fmt: skip
    assert memory.TRACE_MIME == "application/vnd.deeptutor.trace+json"
    assert memory.SURFACES == ("chat", "notebook", "quiz", "kb")


def test_importing_memory_stays_light() -> None:
    code = (
        "import sys, deeptutor_jupyter.memory, deeptutor_jupyter.memory.consolidate, "
        "deeptutor_jupyter.memory.tools, deeptutor_jupyter.memory.scrub, deeptutor_jupyter.cli\n"
        "print(sorted(m for m in ('IPython', 'ipywidgets', 'httpx', 'ipykernel') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
