"""Events are typed end to end: an emitter builds a model, a subscriber ``match``es on it. Nothing
in the package names an event by its type string or reads a ``data`` dict, so those habits cannot
creep back (the AST is read, not the text, so comments and docstrings do not count)."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

from deeptutor_jupyter.runtime.events import EventType

PACKAGE = Path(__file__).resolve().parents[2] / "deeptutor_jupyter"
TYPES = frozenset(typing.get_args(EventType))
# Server-sent events of the fake model's wire: their ``data`` is the SSE field, not a turn event.
SSE = {"testing/fake_llm.py", "testing/transport.py"}


def _names_a_type(node: ast.expr) -> bool:
    """``x.type``, ``x["type"]`` or a variable called ``event_type``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "type"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "type"
    return isinstance(node, ast.Name) and node.id == "event_type"


def _event_strings(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & TYPES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {s for item in node.elts for s in _event_strings(item)}
    return set()


def _reads_event_data(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "data"
        and isinstance(node.value, ast.Name)
        and node.value.id in ("event", "e", "ev")
    )


def offences(source: str, sse: bool = False) -> list[tuple[int, str]]:
    """Where ``source`` compares an event's type with a string, passes a type string to
    ``emit``, or reads ``event.data``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            strings = {s for side in sides for s in _event_strings(side)}
            if strings and any(_names_a_type(side) for side in sides):
                found.append((node.lineno, f"compares a type with {sorted(strings)}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "emit" and node.args and _event_strings(node.args[0]):
                found.append((node.lineno, "emits by type string"))
        elif _reads_event_data(node) and not sse:
            found.append((node.lineno, "reads event.data"))
    return found


def test_the_package_never_names_an_event_by_its_type_string() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, what in offences(
            path.read_text(encoding="utf-8"), path.relative_to(PACKAGE).as_posix() in SSE
        )
    ]
    assert found == []


def test_the_check_sees_each_old_habit() -> None:
    # Without these the test above could pass by seeing nothing.
    assert offences('if event.type == "done": pass')
    assert offences('if event.type in ("content", "thinking"): pass')
    assert offences('if "notice" != e.type: pass')
    assert offences('if message["type"] in STREAMED or message["type"] == "content": pass')
    assert offences('if event_type == "tool_call": pass')
    assert offences('log.emit("content", text="x")')
    assert offences('text = event.data["text"]')
    # What stays allowed: statuses, tool names, typed events.
    assert not offences('if turn.status != "error": pass')
    assert not offences('if call.name == "ask_user": pass')
    assert not offences('log.emit(Content(text="x"))')
    assert not offences("match event.body:\n    case Done(): pass")
