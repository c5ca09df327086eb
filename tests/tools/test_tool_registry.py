from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, Field

import deeptutor_jupyter.tools as tools_package
from deeptutor_jupyter.providers.base import ToolCall
from deeptutor_jupyter.tools import (
    CalculateTool,
    Tool,
    ToolContext,
    ToolRegistry,
    ToolResult,
    default_registry,
)
from deeptutor_jupyter.tools.base import clean_schema


class Point(BaseModel):
    x: int
    y: int = 0


class EchoArgs(BaseModel):
    """Echo arguments."""

    text: str = Field(description="What to echo")
    title: str = "untitled"
    point: Point | None = None


class EchoTool(Tool):
    name: ClassVar[str] = "echo"
    description: ClassVar[str] = "Echo the text back."
    Args: ClassVar[type[BaseModel]] = EchoArgs

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, EchoArgs)
        return ToolResult(content=f"{ctx.session_id}:{args.text}:{args.point}")


class NoArgs(BaseModel):
    pass


class BrokenTool(Tool):
    name: ClassVar[str] = "broken"
    description: ClassVar[str] = "Always fails."
    Args: ClassVar[type[BaseModel]] = NoArgs

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        raise RuntimeError("disk on fire")


class SlowTool(BrokenTool):
    name: ClassVar[str] = "slow"

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        await asyncio.sleep(10)
        return ToolResult(content="late")


class LazyTool(BrokenTool):
    name: ClassVar[str] = "lazy"
    deferred: ClassVar[bool] = True


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(session_id="s1", turn_id="t1", workspace=tmp_path)


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([EchoTool(), BrokenTool(), SlowTool(), LazyTool()])


def call(name: str, arguments: str) -> ToolCall:
    return ToolCall(id="call_1", name=name, arguments=arguments)


def walk(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, list):
        return [found for item in node for found in walk(item)]
    if not isinstance(node, dict):
        return []
    return [node, *(found for key, value in node.items() for found in walk(value))]


def test_schema_is_derived_and_clean() -> None:
    schema = EchoTool.schema()
    assert schema["type"] == "function"
    function = schema["function"]
    assert (function["name"], function["description"]) == ("echo", "Echo the text back.")
    parameters = function["parameters"]
    assert parameters["required"] == ["text"]
    assert parameters["properties"]["text"] == {"description": "What to echo", "type": "string"}
    # A field named "title" survives; pydantic's title annotations do not.
    assert parameters["properties"]["title"] == {"default": "untitled", "type": "string"}
    assert not any(isinstance(node.get("title"), str) for node in walk(parameters))
    assert "$defs" not in parameters
    assert "$ref" not in json.dumps(parameters)
    point = parameters["properties"]["point"]["anyOf"][0]
    assert point["properties"] == {"x": {"type": "integer"}, "y": {"default": 0, "type": "integer"}}


def test_recursive_models_keep_valid_defs() -> None:
    class Node(BaseModel):
        value: int
        children: list[Node] = []

    schema = clean_schema(Node.model_json_schema())
    assert schema["type"] == "object"
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    text = json.dumps(schema)
    for ref in {node["$ref"] for node in walk(schema) if "$ref" in node}:
        assert ref.removeprefix("#/$defs/") in schema["$defs"], text


def test_default_values_are_data_not_schemas() -> None:
    schema = clean_schema({"type": "object", "default": {"title": "kept"}, "title": "Dropped"})
    assert schema == {"type": "object", "default": {"title": "kept"}}


def test_register_get_names(registry: ToolRegistry) -> None:
    assert registry.names() == ["echo", "broken", "slow", "lazy"]
    assert isinstance(registry.get("echo"), EchoTool)
    assert registry.get("missing") is None


def test_duplicate_name_is_refused(registry: ToolRegistry) -> None:
    with pytest.raises(ValueError, match="echo"):
        registry.register(EchoTool())


def test_schemas_default_to_non_deferred_tools(registry: ToolRegistry) -> None:
    names = [schema["function"]["name"] for schema in registry.schemas()]
    assert names == ["echo", "broken", "slow"]
    assert [s["function"]["name"] for s in registry.schemas(["lazy", "echo"])] == ["lazy", "echo"]
    with pytest.raises(KeyError, match="nope"):
        registry.schemas(["nope"])


async def test_execute_runs_the_tool(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await registry.execute(call("echo", '{"text": "hi", "point": {"x": 1}}'), ctx)
    assert result == ToolResult(content="s1:hi:x=1 y=0")


async def test_empty_arguments_mean_no_arguments(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await registry.execute(call("broken", ""), ctx)
    assert "disk on fire" in result.content


async def test_unknown_tool_lists_available(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await registry.execute(call("search", "{}"), ctx)
    assert result.is_error
    assert result.content == "Unknown tool 'search'. Available tools: echo, broken, slow, lazy"


async def test_nameless_call(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await registry.execute(call("", "garbage"), ctx)
    assert result.is_error
    assert "no tool name" in result.content


async def test_invalid_json_quotes_the_parse_error(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    result = await registry.execute(call("echo", '{"text": "hi"'), ctx)
    assert result.is_error
    assert "Invalid arguments for tool 'echo': not valid JSON (Expecting" in result.content
    assert "line 1 column" in result.content
    assert '{"text": "hi"' in result.content


async def test_arguments_must_be_an_object(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await registry.execute(call("echo", '["hi"]'), ctx)
    assert result.is_error
    assert "expected a JSON object, got array" in result.content


async def test_validation_errors_are_listed(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await registry.execute(call("echo", '{"point": {"x": "a lot"}}'), ctx)
    assert result.is_error
    lines = result.content.splitlines()
    assert lines[0] == "Invalid arguments for tool 'echo':"
    assert "- field 'text': Field required" in lines
    assert any(
        line.startswith("- field 'point.x': Input should be a valid integer") for line in lines
    )
    assert result.summary == "Invalid arguments for tool 'echo':"


async def test_exception_in_run_becomes_error(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await registry.execute(call("broken", "{}"), ctx)
    assert result.is_error
    assert result.content == "Tool 'broken' failed: RuntimeError: disk on fire"


async def test_cancellation_propagates(registry: ToolRegistry, ctx: ToolContext) -> None:
    task = asyncio.create_task(registry.execute(call("slow", "{}"), ctx))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_default_registry_calculates(ctx: ToolContext) -> None:
    registry = default_registry()
    assert registry.names() == ["calculate"]
    result = await registry.execute(call("calculate", '{"expression": "6*7"}'), ctx)
    assert (result.is_error, result.content) == (False, "6*7 = 42")


async def test_calculate_rejects_extra_fields(ctx: ToolContext) -> None:
    result = await default_registry().execute(
        call("calculate", '{"expression": "1", "precision": 3}'), ctx
    )
    assert result.is_error
    assert "- field 'precision': Extra inputs are not permitted" in result.content


def test_calculate_schema_matches_args() -> None:
    parameters = CalculateTool.schema()["function"]["parameters"]
    assert parameters["required"] == ["expression"]
    assert parameters["additionalProperties"] is False


def test_public_names() -> None:
    assert sorted(tools_package.__all__) == [
        "CalculateTool",
        "Tool",
        "ToolContext",
        "ToolRegistry",
        "ToolResult",
        "default_registry",
    ]


def test_import_stays_light() -> None:
    code = (
        "import sys, deeptutor_jupyter.tools;"
        "print(sorted(m for m in ('httpx', 'IPython', 'ipywidgets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_schemas_are_built_once_per_tool_and_kept_apart_by_what_they_are_made_of() -> None:
    from deeptutor_jupyter.tools.calculate import CalculateTool
    from deeptutor_jupyter.tools.registry import ToolRegistry, schema_of

    first = ToolRegistry([CalculateTool()]).schemas()
    again = ToolRegistry([CalculateTool()]).schemas()
    assert first == again == [CalculateTool.schema()]
    assert first[0] is again[0]  # the cached dict, not rebuilt

    class Renamed(CalculateTool):
        description = "Another description."

    assert schema_of(Renamed())["function"]["description"] == "Another description."
    assert schema_of(CalculateTool())["function"]["description"] == CalculateTool.description
