"""The ask_user schema the model sees, and what happens to arguments that do not fit it.

The reference (``/work/shared/reference``, section 1) fixes the shape: the derived schema must
match it property for property; bad arguments become an error tool result the model can read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.interaction.audit import AuditLog
from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator
from deeptutor_jupyter.interaction.schema import AskUserArgs, AskUserTool
from deeptutor_jupyter.providers import make_model
from deeptutor_jupyter.providers.base import ToolCall
from deeptutor_jupyter.runtime.context import ModelProfile, TurnContext
from deeptutor_jupyter.runtime.events import EventLog
from deeptutor_jupyter.runtime.orchestrator import Orchestrator
from deeptutor_jupyter.store.db import Store
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from deeptutor_jupyter.tools.base import ToolContext, ToolResult
from deeptutor_jupyter.tools.registry import ToolRegistry

MODES = ["single", "multiple", "text", "number", "date", "directory", "toggle"]
OPTIONS = [{"id": "safe", "label": "Analyse first"}, {"id": "go", "label": "Just do it"}]


def parameters() -> dict[str, Any]:
    schema = AskUserTool.schema()
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "ask_user"
    return schema["function"]["parameters"]  # type: ignore[no-any-return]


def test_schema_has_exactly_the_reference_properties() -> None:
    params = parameters()
    assert params["type"] == "object"
    assert list(params["properties"]) == [
        "title",
        "description",
        "mode",
        "options",
        "allowCustom",
        "submitLabel",
    ]
    assert params["required"] == ["title", "mode"]
    props = params["properties"]
    assert props["title"]["type"] == "string"
    assert props["description"]["type"] == "string"
    assert props["mode"]["type"] == "string"
    assert sorted(props["mode"]["enum"]) == sorted(MODES) and len(props["mode"]["enum"]) == 7
    assert props["allowCustom"]["type"] == "boolean"
    assert props["submitLabel"]["type"] == "string"


def test_options_items_match_the_reference() -> None:
    options = parameters()["properties"]["options"]
    assert options["type"] == "array"
    items = options["items"]
    assert items["type"] == "object"
    assert list(items["properties"]) == ["id", "label", "description", "recommended"]
    assert items["required"] == ["id", "label"]
    assert items["properties"]["id"]["type"] == "string"
    assert items["properties"]["label"]["type"] == "string"
    assert items["properties"]["description"]["type"] == "string"
    assert items["properties"]["recommended"]["type"] == "boolean"


def test_schema_is_flat_for_small_models() -> None:
    text = json.dumps(AskUserTool.schema())
    assert "$ref" not in text and "$defs" not in text
    # pydantic's "title" noise is gone; the property called title stays.
    assert "AskUserArgs" not in text and "AskOption" not in text
    assert "title" in parameters()["properties"]


def test_reference_example_call_validates() -> None:
    example = {
        "title": "请选择执行方式",
        "description": "不同方式会影响接下来的工具权限。",
        "mode": "single",
        "options": [
            {
                "id": "safe",
                "label": "先分析",
                "description": "只阅读并给出方案",
                "recommended": True,
            },
            {"id": "implement", "label": "直接实现", "description": "开始修改工作区"},
        ],
        "allowCustom": False,
        "submitLabel": "继续",
    }
    checked = registry().validate(ToolCall("call_1", "ask_user", json.dumps(example)))
    assert not isinstance(checked, ToolResult)
    tool, args = checked
    assert isinstance(tool, AskUserTool) and isinstance(args, AskUserArgs)
    assert [o.id for o in args.options] == ["safe", "implement"]
    assert args.options[0].recommended is True and args.submitLabel == "继续"


@pytest.mark.parametrize("mode", ["text", "number", "date", "directory"])
def test_modes_without_options_need_none(mode: str) -> None:
    checked = registry().validate(call({"title": "A value?", "mode": mode}))
    assert not isinstance(checked, ToolResult)


def registry() -> ToolRegistry:
    return ToolRegistry([AskUserTool()])


def call(arguments: dict[str, Any] | str) -> ToolCall:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall("call_bad", "ask_user", raw)


BAD: list[tuple[str, dict[str, Any] | str, list[str]]] = [
    ("unknown mode", {"title": "Q?", "mode": "slider"}, ["'mode'", "single"]),
    ("single without options", {"title": "Q?", "mode": "single"}, ["'single'", "option"]),
    ("multiple without options", {"title": "Q?", "mode": "multiple"}, ["'multiple'", "option"]),
    ("toggle without options", {"title": "Q?", "mode": "toggle", "options": []}, ["'toggle'"]),
    (
        "duplicate option ids",
        {"title": "Q?", "mode": "single", "options": [*OPTIONS, {"id": "safe", "label": "X"}]},
        ["unique", "safe"],
    ),
    ("empty title", {"title": "", "mode": "text"}, ["'title'", "empty"]),
    ("blank title", {"title": "   \t", "mode": "text"}, ["'title'", "empty"]),
    ("missing title", {"mode": "text"}, ["'title'", "required"]),
    ("missing mode", {"title": "Q?"}, ["'mode'", "required"]),
    (
        "option without id",
        {"title": "Q?", "mode": "single", "options": [{"label": "A"}]},
        ["options.0.id", "required"],
    ),
    (
        "option without label",
        {"title": "Q?", "mode": "multiple", "options": [{"id": "a"}]},
        ["options.0.label", "required"],
    ),
    (
        "option with empty id",
        {"title": "Q?", "mode": "single", "options": [{"id": "", "label": "A"}]},
        ["options.0.id"],
    ),
    ("not JSON", '{"title": "Q?", "mode": ', ["not valid JSON"]),
    ("not an object", '["single"]', ["expected a JSON object"]),
]


@pytest.mark.parametrize(("case", "arguments", "words"), BAD, ids=[b[0] for b in BAD])
def test_bad_arguments_are_an_error_result_naming_the_problem(
    case: str, arguments: dict[str, Any] | str, words: list[str]
) -> None:
    checked = registry().validate(call(arguments))
    assert isinstance(checked, ToolResult), case
    assert checked.is_error and not checked.stop_turn
    assert "ask_user" in checked.content
    for word in words:
        assert word in checked.content, (case, checked.content)


async def test_run_is_the_explicit_degraded_result(tmp_path: Path) -> None:
    args = AskUserArgs(title="Which level?", mode="single", options=OPTIONS)  # type: ignore[arg-type]
    ctx = ToolContext(session_id="s", turn_id="t", workspace=tmp_path)
    result = await AskUserTool().run(args, ctx)
    assert result.is_error and not result.stop_turn
    assert "plain text" in result.content
    # Through the registry (no coordinator): the same degraded result, not a crash.
    executed = await registry().execute(call({"title": "Q?", "mode": "text"}), ctx)
    assert executed.is_error and "plain text" in executed.content


async def test_orchestrator_returns_bad_arguments_to_the_model_without_asking(
    tmp_path: Path,
) -> None:
    """With a coordinator present, invalid ask_user arguments never reach the store or a form."""
    store = Store(tmp_path / "state.db")
    coordinator = InteractionCoordinator(
        store, AuditLog(tmp_path / "audit.jsonl"), workspace=tmp_path
    )
    bad = ToolCallSpec("ask_user", {"title": "Pick", "mode": "single"}, id="call_bad_1")
    with FakeLLMServer([Reply(tool_calls=[bad]), Reply(text="I will ask in words.")]) as server:
        model = make_model(provider="custom", model="fake-model", base_url=server.url)
        try:
            orch = Orchestrator(store, coordinator=coordinator)
            profile = ModelProfile(provider="custom", model="fake-model")
            ctx = TurnContext(session_id="s-1", turn_id="turn-1", question="Q", profile=profile)
            log = EventLog("turn-1", store)
            turn = orch.start_turn(ctx, model, log)
            assert turn.task is not None
            await turn.task
        finally:
            await model.aclose()
        requests = server.requests
    assert turn.status == "done" and turn.answer == "I will ask in words."
    tool = [m for m in requests[1].body["messages"] if m.get("role") == "tool"]
    assert len(tool) == 1 and tool[0]["tool_call_id"] == "call_bad_1"
    assert "Invalid arguments for tool 'ask_user'" in tool[0]["content"]
    assert "'single' needs at least one option" in tool[0]["content"]
    assert store.pending_for() == []
    assert not any(e.body.type == "user_input_required" for e in log.events)
    assert not (tmp_path / "audit.jsonl").exists()
    store.close()
