"""The sealed ``TutorSession``: no surface reaches into its parts, one function opens a home.

AST scans of the package, so a new caller that reaches in fails here, not in review.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from deeptutor_jupyter.runtime.session import TutorSession

PACKAGE = Path(__file__).resolve().parents[1] / "deeptutor_jupyter"
PARTS = {"store", "coordinator", "orchestrator"}
NOT_YET_SEALED: set[str] = set()  # every module is sealed


def modules() -> Iterator[tuple[str, ast.AST]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        yield rel, ast.parse(path.read_text(encoding="utf-8"))


def names_a_session(node: ast.expr) -> bool:
    """``session``, ``tutor.session``, ``self.session``: how the package names a session."""
    if isinstance(node, ast.Name):
        return node.id == "session" or node.id.endswith("_session")
    if isinstance(node, ast.Attribute):
        return node.attr == "session"
    return False


def reaches(tree: ast.AST) -> list[ast.Attribute]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.lstrip("_") in PARTS
        and names_a_session(node.value)
    ]


def reach_ins(allowed: set[str]) -> list[str]:
    return [
        f"{rel}:{node.lineno}: {ast.unparse(node)}"
        for rel, tree in modules()
        if not rel.startswith("runtime/session") and rel not in allowed
        for node in reaches(tree)
    ]


def test_no_module_outside_the_session_touches_its_store_coordinator_or_orchestrator() -> None:
    assert reach_ins(NOT_YET_SEALED) == []


def test_the_scan_finds_a_reach_in() -> None:
    # The scan itself works: each way the package names a session is found.
    code = "a = tutor.session.store\nb = self.session._coordinator\nc = quiz_session.orchestrator"
    assert [ast.unparse(n) for n in reaches(ast.parse(code))] == [
        "tutor.session.store",
        "self.session._coordinator",
        "quiz_session.orchestrator",
    ]


def test_the_parts_are_private_on_the_session() -> None:
    session = TutorSession("lesson.ipynb", resolve=lambda _flags: None)  # type: ignore[arg-type,return-value]
    assert not hasattr(session, "coordinator")
    parts = {"_store", "_coordinator", "_orchestrator", "_planner", "_watcher", "_learning"}
    assert parts <= set(vars(session))
    # No part is kept in a module dict keyed by the session's id.
    offenders = [
        f"{rel}:{node.lineno}"
        for rel, tree in modules()
        if rel not in NOT_YET_SEALED
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "id"
        and any(isinstance(a, ast.expr) and names_a_session(a) for a in node.args)
    ]
    assert offenders == []


def test_one_function_opens_a_home_for_the_kernel_and_the_server() -> None:
    """The store and the interaction coordinator are built in runtime/home.py only."""
    built = [
        f"{rel}:{node.lineno}: {ast.unparse(node.func)}"
        for rel, tree in modules()
        if rel != "runtime/home.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (
                isinstance(node.func, ast.Name)
                and node.func.id in {"Store", "InteractionCoordinator"}
            )
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "InteractionCoordinator")
        )
    ]
    assert built == []
