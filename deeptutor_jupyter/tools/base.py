"""What a tool is: typed pydantic arguments, an async ``run``, and a schema derived from both."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from deeptutor_jupyter.messages import ToolResult

if TYPE_CHECKING:
    from deeptutor_jupyter.memory.store import MemoryStore
    from deeptutor_jupyter.skills.library import Skill

__all__ = ["Tool", "ToolContext", "ToolDeps", "ToolResult", "clean_schema"]

ArgsT = TypeVar("ArgsT", bound=BaseModel)


@dataclass
class ToolDeps:
    """What a turn's tools may use besides their arguments, built by the session for each turn
    (runtime/plan.py: ``tool_deps``) and rebuilt when a saved turn resumes."""

    home: Path | None = None  # the learner's DEEPTUTOR_HOME
    memory: MemoryStore | None = None
    trace_id: str = ""  # the turn's L1 trace, which a memory write cites
    kbs: list[str] = field(default_factory=list)  # knowledge bases selected for the turn
    skills: Mapping[str, Skill] | None = None  # None: discovered from home and the course
    # Redacted from every result (a learner may have the key in a variable or a cell).
    secrets: list[str] = field(default_factory=list, repr=False)
    loaded_tools: set[str] = field(default_factory=set)  # deferred tools loaded in the session
    # interaction/quiz.py's QuizCoordinator, which make_quiz pauses on (None: no quiz form here)
    quizzes: Any = None
    # tool call id -> the store's row of that deferred call of this conversation (edit_cell
    # reads the learner's confirmation there); None where there is no store
    answered: Callable[[str], Any] | None = None
    # Whether ask_user reaches the learner as a form in this turn (its answer then is in the
    # store); set by the orchestrator. False in a terminal, where ask_user degrades.
    forms: bool = False


@dataclass
class ToolContext:
    """Where a tool runs: the session and turn it serves, the learner's workspace and what the
    session gives the turn's tools."""

    session_id: str
    turn_id: str
    workspace: Path
    deps: ToolDeps = field(default_factory=ToolDeps)
    # Ask the learner mid-call (ask_user's arguments -> its result's JSON), through the one
    # pending-interaction path; set per call by the orchestrator where a form can be shown
    # (an MCP server's elicitation uses it), else None.
    ask: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None


class Tool(ABC, Generic[ArgsT]):
    """A tool with typed arguments: ``class Calculate(Tool[CalculateArgs])`` gets its validated
    ``CalculateArgs`` in ``run``; the registry validates them against ``Args`` first."""

    name: ClassVar[str]
    description: ClassVar[str]
    Args: ClassVar[type[BaseModel]]
    # Deferred tools stay out of the schemas sent by default until the loop loads them.
    deferred: ClassVar[bool] = False

    @abstractmethod
    async def run(self, args: ArgsT, ctx: ToolContext) -> ToolResult: ...

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The OpenAI function-tool schema, derived from ``Args``."""
        return {
            "type": "function",
            "function": {
                "name": cls.name,
                "description": cls.description,
                "parameters": clean_schema(cls.Args.model_json_schema()),
            },
        }


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's ``title`` noise and inline ``$defs`` so small models see a flat schema.

    Recursive models cannot be inlined; they keep their ``$defs``, which stay valid references.
    """
    defs = schema.get("$defs", {})
    body = _without(schema, "$defs")
    try:
        return _clean(_inline(body, defs, ()))  # type: ignore[no-any-return]
    except _RecursiveRef:
        # Function parameters must be an object at the top, so a top-level $ref is resolved once.
        top = body.get("$ref", "")
        if isinstance(top, str) and top.startswith("#/$defs/"):
            body = {**defs[top.removeprefix("#/$defs/")], **_without(body, "$ref")}
        kept = _clean(body)
        kept["$defs"] = {name: _clean(value) for name, value in defs.items()}
        return kept  # type: ignore[no-any-return]


def _without(node: dict[str, Any], key: str) -> dict[str, Any]:
    return {name: value for name, value in node.items() if name != key}


class _RecursiveRef(Exception):
    pass


def _inline(node: Any, defs: dict[str, Any], stack: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs, stack) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in stack:
            raise _RecursiveRef(name)
        siblings = _without(node, "$ref")
        return {**_inline(defs[name], defs, (*stack, name)), **_inline(siblings, defs, stack)}
    return {key: _inline(value, defs, stack) for key, value in node.items()}


# Values under these keys are data, not schemas: a default dict may well have a "title" key.
_DATA_KEYS = frozenset({"default", "examples", "const", "enum"})


def _clean(node: Any) -> Any:
    if isinstance(node, list):
        return [_clean(item) for item in node]
    if not isinstance(node, dict):
        return node
    cleaned = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _DATA_KEYS:
            cleaned[key] = value
        elif key == "properties" and isinstance(value, dict):
            # Keys here are field names, so a field called "title" must survive.
            cleaned[key] = {name: _clean(sub) for name, sub in value.items()}
        else:
            cleaned[key] = _clean(value)
    return cleaned
