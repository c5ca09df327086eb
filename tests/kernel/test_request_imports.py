"""What a kernel's first request waits for (kernel/warm.py ``REQUEST_MODULES``) stays lean: no
model built at import (lazy_model.py), no validator made, no module it does not use (issue 28)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from pydantic import ValidationError

from deeptutor_jupyter.book.model import Chapter
from deeptutor_jupyter.lazy_model import LazyModel

BUILT = """
import importlib, json, pydantic, re
adapters = []  # a TypeAdapter is built when made, whatever its models' config
_init = pydantic.TypeAdapter.__init__
def _made(self, kind, *args, **kwargs):
    adapters.append(repr(kind)[:80])
    _init(self, kind, *args, **kwargs)
pydantic.TypeAdapter.__init__ = _made
from deeptutor_jupyter.kernel.warm import REQUEST_MODULES
for name in REQUEST_MODULES:
    importlib.import_module(name)
todo, ours, built = list(pydantic.BaseModel.__subclasses__()), [], []
while todo:
    cls = todo.pop()
    todo += cls.__subclasses__()
    if cls.__module__.startswith("deeptutor_jupyter"):
        ours.append(cls.__qualname__)
        if cls.__pydantic_complete__:
            built.append(f"{cls.__module__}.{cls.__qualname__}")
at_import = list(adapters)  # building the schemas below makes some
# What a chat turn does with the tools before its request: register them, send the schemas of
# those it always mounts, list the deferred ones in the manifest.
from deeptutor_jupyter.kernel.notebook_context import kernel_tools
from deeptutor_jupyter.runtime.plan import ALWAYS, runtime_tools
from deeptutor_jupyter.tools.deferred import deferred_manifest
from deeptutor_jupyter.tools.registry import ToolRegistry
from deeptutor_jupyter.runtime.orchestrator import AskUserTool, LoadToolsTool, MakeQuizTool
turn_tools = (AskUserTool(), LoadToolsTool(), MakeQuizTool())  # what the orchestrator adds
registry = ToolRegistry([*kernel_tools(None), *runtime_tools(), *turn_tools])
sent = registry.schemas([n for n in ALWAYS if registry.get(n)])
deferred_manifest([t for n in registry.names() if (t := registry.get(n)) and t.deferred])
# and with the learning store: the system prompt's standing (none without a path)
import tempfile
from pathlib import Path
from deeptutor_jupyter.runtime.learning import standing_text
from deeptutor_jupyter.store.learning import LearningStore
with tempfile.TemporaryDirectory() as home:
    store = LearningStore(Path(home) / "state.db")
    assert standing_text(store) == ""
    store.close()
loaded = [m for m in UNUSED if m in sys.modules]
# The sent tools' schemas come with the package (tools/schema_file.py): no argument model built.
args_built = [
    tool.Args.__qualname__
    for n in ALWAYS
    if (tool := registry.get(n)) is not None and tool.Args.__pydantic_complete__
]
# Regular expressions compiled at first use, not at import (agent/text_tools.py and friends).
from deeptutor_jupyter.agent import text_tools
from deeptutor_jupyter.knowledge import tokenize as _tokenize_function
from deeptutor_jupyter.providers import errors
tokenize_module = sys.modules["deeptutor_jupyter.knowledge.tokenize"]
compiled = [
    name
    for name, done in (
        ("text_tools", text_tools._patterns.cache_info().currsize),
        ("knowledge.tokenize", tokenize_module._token.cache_info().currsize),
        ("providers.errors", any(key[1] == errors._TOOLS for key in re._cache)),
    )
    if done
]
sent_names = [schema['function']['name'] for schema in sent]
print(json.dumps([len(ours), built, at_import, loaded, sent_names, args_built, compiled]))
"""
# Not used by a first turn without a knowledge base, a TUTOR.md or nested skill front matter.
UNUSED = (
    "deeptutor_jupyter.knowledge.base",  # the index code (knowledge/listing.py)
    "deeptutor_jupyter.knowledge.ingest",
    "deeptutor_jupyter.knowledge.model",  # search_knowledge's results, imported when it runs
    "yaml",  # skills/_frontmatter.py reads flat front matter itself
    # The deferred and solve tools stand in (tools/light.py) until a turn sends or calls one.
    "deeptutor_jupyter.cells",
    "deeptutor_jupyter.book",
    "deeptutor_jupyter.solve",
    "deeptutor_jupyter.memory.ops",  # a memory edit (memory/store.py imports it then)
    "deeptutor_jupyter.memory.notebooks",  # rebuilding L1 from saved notebooks
    "deeptutor_jupyter.memory.runs",  # the upkeep after the turn (warm.VIEW_MODULES)
    "deeptutor_jupyter.learning.path",  # the standing of a learner with a path
    "deeptutor_jupyter.learning.mastery",  # grading a quiz, a path's standing
    "tomllib",  # config.py and tools/mcp/config.py: only where a settings.toml exists
    "tarfile",  # runtime/course_files.py: packing or unpacking a course
)


@pytest.fixture(scope="module")
def imported() -> list[Any]:
    code = f"import sys\nUNUSED = {UNUSED!r}\n{BUILT}"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return list(json.loads(out.stdout))


def test_importing_what_a_first_request_needs_builds_no_model(imported: list[Any]) -> None:
    # A model added to these modules as a plain BaseModel would be built at import, in the
    # time a Run All's first question waits for (issue 28); it derives LazyModel instead,
    # and instances or TypeAdapters are made when first needed, not at import.
    count, built, adapters, *_ = imported
    assert count > 50
    assert built == []
    assert adapters == []  # nor a validator made at import (memory/ops.py makes its own at use)


def test_a_lazy_model_validates_and_rejects_as_a_built_one() -> None:
    class Point(LazyModel):
        x: int

    assert Point.__pydantic_complete__ is False  # nothing built until it is used
    with pytest.raises(ValidationError, match="x"):
        Point(x="not a number")  # type: ignore[arg-type]
    assert Point(x="3").x == 3  # type: ignore[arg-type]
    assert Point.__pydantic_complete__ is True
    with pytest.raises(ValidationError):
        Chapter.model_validate({"title": 7})


def test_importing_what_a_first_request_needs_leaves_out_what_it_does_not_use(
    imported: list[Any],
) -> None:
    assert imported[3] == []


def test_a_first_request_sends_saved_schemas_and_builds_no_argument_model(
    imported: list[Any],
) -> None:
    # Building a tool's schema builds its arguments model (~9 ms for a chat turn's tools, in
    # the time a Run All's first question waits); they come with the package instead.
    _, _, _, _, sent, args_built, _ = imported
    assert {"make_quiz", "ask_user", "read_memory"} <= set(sent), sent
    assert args_built == []


def test_a_first_request_compiles_no_regular_expression_it_does_not_use(
    imported: list[Any],
) -> None:
    assert imported[6] == []
