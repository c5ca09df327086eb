"""search_knowledge through the tool registry, and the one table that decides mounts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deeptutor_jupyter.knowledge import (
    CONDITIONAL_MOUNTS,
    KnowledgeBase,
    MountContext,
    mounted_tools,
)
from deeptutor_jupyter.knowledge.tools import SearchKnowledgeTool
from deeptutor_jupyter.providers.base import ToolCall
from deeptutor_jupyter.tools.base import ToolContext, ToolDeps, ToolResult
from deeptutor_jupyter.tools.registry import ToolRegistry


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    algebra = tmp_path / "algebra"
    algebra.mkdir()
    (algebra / "quadratics.md").write_text(
        "# Quadratics\n\nThe discriminant b^2 - 4ac decides how many roots there are.\n",
        encoding="utf-8",
    )
    (tmp_path / "history.txt").write_text("The printing press spread ideas.", encoding="utf-8")
    KnowledgeBase(home, "algebra", root=tmp_path).add_sources([algebra])
    KnowledgeBase(home, "history", root=tmp_path).add_sources([tmp_path / "history.txt"])
    return home


def ctx(home: Path, kbs: list[str]) -> ToolContext:
    return ToolContext("s", "t", home, deps=ToolDeps(home=home, kbs=kbs))


async def call(ctx: ToolContext, **arguments: object) -> ToolResult:
    registry = ToolRegistry([SearchKnowledgeTool()])
    tool_call = ToolCall("call_1", "search_knowledge", json.dumps(arguments))
    return await registry.execute(tool_call, ctx)


def test_schema_is_derived() -> None:
    schema = SearchKnowledgeTool.schema()["function"]
    assert schema["name"] == "search_knowledge"
    assert schema["parameters"]["required"] == ["query"]
    assert set(schema["parameters"]["properties"]) == {"query", "kb"}


async def test_results_are_numbered_with_sources(home: Path) -> None:
    result = await call(ctx(home, ["algebra", "history"]), query="discriminant roots")
    assert not result.is_error
    assert result.content.startswith("Cite these sources as [n]")
    assert "[1] algebra/quadratics.md, line 1 — Quadratics (kb algebra, score " in result.content
    assert "b^2 - 4ac" in result.content
    (hit,) = result.data["hits"]  # type: ignore[index]
    assert hit["kb"] == "algebra" and hit["file"] == "algebra/quadratics.md"
    assert hit["chunk_id"] == "algebra/quadratics.md#0" and hit["score"] > 0
    assert hit["cell"] is None and hit["page"] is None and hit["title"] == "Quadratics"
    assert hit["link"] == "lab/tree/algebra/quadratics.md#line=0"


async def test_kb_argument_narrows_the_search(home: Path) -> None:
    result = await call(ctx(home, ["algebra", "history"]), query="printing press", kb="algebra")
    assert result.data == {"hits": []} and "No passage matches" in result.content
    result = await call(ctx(home, ["algebra", "history"]), query="printing press", kb="history")
    assert result.data["hits"][0]["kb"] == "history"  # type: ignore[index]


async def test_a_hit_carries_its_file_and_the_fragment_that_opens_the_place(
    home: Path, tmp_path: Path
) -> None:
    # The surface makes the link relative to where it shows it (kernel/turn_plan.py for a
    # notebook); the tool gives the absolute file and the fragment.
    result = await call(ctx(home, ["algebra"]), query="roots")
    hit = result.data["hits"][0]  # type: ignore[index]
    assert hit["link"].endswith("quadratics.md#line=0")
    assert Path(hit["path"]).is_absolute() and Path(hit["path"]).name == "quadratics.md"


@pytest.mark.parametrize(
    ("kbs", "kb", "message"),
    [
        ([], None, "No knowledge base is selected"),
        (["algebra"], "history", "Unknown knowledge base 'history'; selected: algebra"),
        (["nothere"], None, "No knowledge base named 'nothere'"),
        (["bad name"], None, "Invalid knowledge base name"),
    ],
)
async def test_errors_come_back_as_tool_errors(
    home: Path, kbs: list[str], kb: str | None, message: str
) -> None:
    arguments: dict[str, object] = {"query": "roots"}
    if kb:
        arguments["kb"] = kb
    result = await call(ctx(home, kbs), **arguments)
    assert result.is_error and message in result.content


async def test_empty_query_is_rejected_by_validation(home: Path) -> None:
    result = await call(ctx(home, ["algebra"]), query="")
    assert result.is_error and "query" in result.content


ALWAYS = ("ask_user", "calculate")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, ["ask_user", "calculate"]),
        ({"has_kb": True}, ["ask_user", "calculate", "search_knowledge"]),
        ({"has_skills": True}, ["ask_user", "calculate", "read_skill"]),
        ({"has_deferred": True}, ["ask_user", "calculate", "load_tools"]),
        ({"has_attachments": True}, ["ask_user", "calculate"]),
        (
            {"has_kb": True, "has_skills": True, "has_deferred": True},
            ["ask_user", "calculate", "search_knowledge", "read_skill", "load_tools"],
        ),
        ({"has_kb": True, "user_tools": ("search_knowledge",)}, ["search_knowledge"]),
        ({"user_tools": ("search_knowledge", "calculate")}, ["calculate"]),  # restricts only
        ({"user_tools": ()}, []),
        ({"has_kb": True, "has_skills": True, "no_tools": True}, []),
    ],
)
def test_mount_table(flags: dict[str, object], expected: list[str]) -> None:
    assert mounted_tools(MountContext(**flags), always=ALWAYS) == expected  # type: ignore[arg-type]


def test_mount_table_names_real_flags_and_dedupes() -> None:
    for flag, _tool in CONDITIONAL_MOUNTS:
        assert hasattr(MountContext(), flag)
    ctx = MountContext(has_skills=True)
    assert mounted_tools(ctx, always=["read_skill", "ask_user"]) == ["read_skill", "ask_user"]


async def test_numbers_hold_across_the_searches_of_one_turn(home: Path) -> None:
    tool = SearchKnowledgeTool()
    context = ctx(home, ["algebra", "history"])
    first = await tool.run(tool.Args(query="discriminant roots"), context)
    second = await tool.run(tool.Args(query="printing press ideas discriminant"), context)
    numbers = {row["file"]: row["n"] for row in (first.data or {})["hits"]}
    later = {row["file"]: row["n"] for row in (second.data or {})["hits"]}
    assert numbers == {"algebra/quadratics.md": 1}
    # The passage seen before keeps [1]; the new one continues the count.
    assert later == {"algebra/quadratics.md": 1, "history.txt": 2}
    assert "[2] history.txt" in second.content and "[1] algebra/quadratics.md" in second.content
    other_turn = ToolContext("s", "t2", home, deps=context.deps)
    fresh = await tool.run(tool.Args(query="printing press"), other_turn)
    assert [row["n"] for row in (fresh.data or {})["hits"]] == [1]
