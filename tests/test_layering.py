"""The import direction of DESIGN.md: nothing below ``kernel`` imports IPython or ipywidgets."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "deeptutor_jupyter"
BELOW_KERNEL = [
    "agent",
    "book",
    "cells",
    "interaction",
    "knowledge",
    "learning",
    "memory",
    "providers",
    "runtime",
    "skills",
    "solve",
    "store",
    "testing",
    "tools",
]
FRONTEND = ("IPython", "ipywidgets", "ipykernel", "deeptutor_jupyter.kernel")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_module_below_kernel_imports_a_frontend_even_lazily():
    offenders = [
        f"{path.relative_to(PACKAGE.parent)} imports {name}"
        for package in BELOW_KERNEL
        for path in (PACKAGE / package).rglob("*.py")
        for name in imported_modules(path)
        if name.startswith(FRONTEND)
    ]
    assert offenders == []


def test_importing_the_runtime_loads_no_frontend():
    code = (
        "import sys\n"
        + "".join(f"import deeptutor_jupyter.{p}\n" for p in BELOW_KERNEL)
        + "import deeptutor_jupyter.runtime.orchestrator, deeptutor_jupyter.agent.loop\n"
        + f"bad = [m for m in sys.modules if m.startswith({FRONTEND!r})]\n"
        + "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# The layers of DESIGN.md, highest first; a module may import its own layer or a lower one.
LAYERS = {
    "cli": 4,
    "kernel": 3,
    "server": 3,
    "hub": 3,
    "hosts": 3,
    "runtime": 2,
    "agent": 1,
    "tools": 1,
    "cells": 1,
    "book": 1,
    "solve": 1,
    "interaction": 1,
    "memory": 1,
    "knowledge": 1,
    "learning": 1,
    "skills": 1,
    "store": 0,
    "providers": 0,
    "messages": 0,
    "config": 0,
    "setup_help": 0,
    "testing": 0,
    "_files": 0,
    "redact": 0,
    "limits": 0,
    "words": 0,
    "errors": 0,
    "lazy_model": 0,
    "lazy_names": 0,
}


def test_every_top_level_module_has_a_layer():
    """A new package or module gets its place in the import order, or the order checks nothing
    about it."""
    found = {
        p.stem if p.is_file() else p.name
        for p in PACKAGE.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    assert sorted(found - set(LAYERS) - {"__main__"}) == []


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def runtime_imports(path: Path, *, typing_too: bool = False) -> set[str]:
    """Package modules this file imports when it runs (lazy imports included, TYPE_CHECKING
    blocks only with ``typing_too``), with ``from pkg import submodule`` resolved to the
    submodule."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test)
        for n in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only and not typing_too:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("deeptutor_jupyter"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not node.module.startswith("deeptutor_jupyter"):
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                is_module = (PACKAGE.parent / sub.replace(".", "/")).with_suffix(".py").exists()
                is_package = (PACKAGE.parent / sub.replace(".", "/") / "__init__.py").exists()
                found.add(sub if is_module or is_package else node.module)
    return found


def import_graph(*, typing_too: bool = False) -> dict[str, set[str]]:
    return {
        module_name(p): runtime_imports(p, typing_too=typing_too) for p in PACKAGE.rglob("*.py")
    }


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def test_every_import_points_down_or_sideways():
    offenders = [
        f"{mod} (layer {layer_of(mod)}) imports {dep} (layer {layer_of(dep)})"
        for mod, deps in import_graph().items()
        for dep in deps
        if (a := layer_of(mod)) is not None and (b := layer_of(dep)) is not None and b > a
    ]
    assert offenders == []


def test_the_server_and_the_hub_never_import_the_kernel_side():
    offenders = [
        f"{mod} imports {dep}"
        for mod, deps in import_graph().items()
        if mod.startswith(("deeptutor_jupyter.server", "deeptutor_jupyter.hub"))
        for dep in deps
        if dep.startswith("deeptutor_jupyter.kernel")
    ]
    assert offenders == []


def test_no_import_cycle_in_the_package():
    graph = import_graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep) :], dep] if dep in path else [node, dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    # The package's own __init__ loads the kernel side lazily, for load_ipython_extension.
    cycles = [c for c in cycles if c[0] != "deeptutor_jupyter" and c[-1] != "deeptutor_jupyter"]
    assert cycles == []
    assert "deeptutor_jupyter.kernel.tutor" in graph  # the graph is the real package


def test_the_hub_drives_no_session_it_imports_nothing_of_the_runtime():
    """docs/hub.md: the service is a model gateway and a pack source; turns run in kernels."""
    graph = import_graph(typing_too=True)
    offenders = [
        f"{mod} imports {dep}"
        for mod, deps in graph.items()
        if mod.startswith("deeptutor_jupyter.hub")
        for dep in deps
        if dep.startswith(("deeptutor_jupyter.runtime", "deeptutor_jupyter.kernel"))
    ]
    assert offenders == []
    assert "deeptutor_jupyter.hub.gateway" in graph


@pytest.mark.parametrize(
    ("package", "modules"),
    [
        (
            "hub",
            "deeptutor_jupyter.hub, deeptutor_jupyter.hub.app, deeptutor_jupyter.hub.configure",
        ),
        ("server", "deeptutor_jupyter.server, deeptutor_jupyter.server.handlers"),
    ],
)
def test_the_services_never_import_a_frontend_or_the_kernel_side(package: str, modules: str):
    offenders = [
        f"{path.relative_to(PACKAGE.parent)} imports {name}"
        for path in (PACKAGE / package).rglob("*.py")
        for name in imported_modules(path)
        if name.startswith(FRONTEND)
    ]
    assert offenders == []
    code = (
        "import sys\n"
        f"import {modules}\n"
        f"bad = [m for m in sys.modules if m.startswith({FRONTEND!r})]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_configure_in_jupyterhub_config_imports_nothing_heavy():
    # jupyterhub_config.py runs configure() at every hub start; it needs the standard library only.
    code = (
        "import sys\n"
        "from deeptutor_jupyter.hub import configure\n"
        "heavy = [m for m in ('httpx', 'sqlalchemy', 'tornado', 'jupyterhub', 'pydantic') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def tangles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan): each holds a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for dep in graph.get(node, ()):
            if dep not in graph:
                continue
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


# runtime/learning.py names TutorSession for its types while the session holds the learning
# state; the learning state moves into the session on branch quizpend (issue 19), which ends it.
KNOWN_TANGLES = [{"deeptutor_jupyter.runtime.learning", "deeptutor_jupyter.runtime.session"}]


def test_no_import_cycle_even_counting_type_checking_imports():
    """A cycle through ``if TYPE_CHECKING:`` imports is still two modules that cannot be read
    (or split) apart; each layer names what it needs of a higher one with a Protocol."""
    graph = import_graph(typing_too=True)
    # The package's own __init__ loads the kernel side lazily, for load_ipython_extension.
    graph.pop("deeptutor_jupyter")
    found = tangles(graph)
    assert [g for g in found if g not in KNOWN_TANGLES] == []


def test_the_cycle_finder_finds_a_cycle_through_type_checking_imports():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert tangles(graph) == [{"a", "b", "c"}]
    # and the graph of the package has the TYPE_CHECKING edges the runtime graph leaves out
    assert (
        "deeptutor_jupyter.runtime.session"
        in import_graph(typing_too=True)["deeptutor_jupyter.runtime.learning"]
    )
    assert (
        "deeptutor_jupyter.runtime.session"
        not in import_graph()["deeptutor_jupyter.runtime.learning"]
    )
