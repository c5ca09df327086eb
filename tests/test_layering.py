"""The import direction of DESIGN.md: nothing below ``kernel`` imports IPython or ipywidgets."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "deeptutor_jupyter"
BELOW_KERNEL = [
    "agent",
    "interaction",
    "knowledge",
    "memory",
    "providers",
    "runtime",
    "skills",
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


def test_the_server_extension_never_imports_the_kernel_side():
    offenders = [
        f"{path.relative_to(PACKAGE.parent)} imports {name}"
        for path in (PACKAGE / "server").rglob("*.py")
        for name in imported_modules(path)
        if name.startswith(FRONTEND)
    ]
    assert offenders == []
    code = (
        "import sys\n"
        "import deeptutor_jupyter.server, deeptutor_jupyter.server.handlers\n"
        f"bad = [m for m in sys.modules if m.startswith({FRONTEND!r})]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
