"""One exception root: every error the package raises on purpose is a ``DeepTutorError`` with a
``code``, exported from the package, and keeps its builtin base for older ``except`` clauses."""

from __future__ import annotations

import importlib

import pytest

import deeptutor_jupyter
from deeptutor_jupyter import DeepTutorError

PUBLIC = [
    ("deeptutor_jupyter.skills.library", "SkillError", ValueError),
    ("deeptutor_jupyter.skills._frontmatter", "FrontMatterError", ValueError),
    ("deeptutor_jupyter.runtime.plan", "PlanError", ValueError),
    ("deeptutor_jupyter.providers.base", "ProviderError", Exception),
    ("deeptutor_jupyter.interaction.coordinator", "InteractionError", Exception),
    ("deeptutor_jupyter.interaction.coordinator", "InvalidAnswer", Exception),
    ("deeptutor_jupyter.config", "SettingsFileError", ValueError),
    ("deeptutor_jupyter.kernel.magics", "UsageError", ValueError),
    ("deeptutor_jupyter.store.db", "StoreError", RuntimeError),
    ("deeptutor_jupyter.tools.calculate", "CalculationError", Exception),
    ("deeptutor_jupyter.knowledge.model", "KnowledgeIndexError", RuntimeError),
    ("deeptutor_jupyter.knowledge.ingest", "IngestError", ValueError),
    ("deeptutor_jupyter.memory.document", "DocumentError", ValueError),
    ("deeptutor_jupyter.memory.consolidate", "RunBusyError", RuntimeError),
    ("deeptutor_jupyter.memory.scrub", "NotebookError", ValueError),
]


@pytest.mark.parametrize(("module", "name", "builtin"), PUBLIC)
def test_each_public_error_has_the_root_and_its_old_base(module: str, name: str, builtin: type):
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, DeepTutorError) and issubclass(cls, builtin)
    assert isinstance(cls.code, str) and cls.code


def test_codes_name_one_case_each() -> None:
    classes = [getattr(importlib.import_module(m), n) for m, n, _ in PUBLIC]
    codes = [c.code for c in classes if "code" in vars(c)]
    assert len(codes) == len(set(codes))


def test_the_root_is_exported_and_a_provider_error_carries_its_kind_as_code() -> None:
    from deeptutor_jupyter.providers.base import ProviderError

    assert "DeepTutorError" in deeptutor_jupyter.__all__
    error = ProviderError("auth", "The key was rejected.")
    assert error.code == "auth" and isinstance(error, DeepTutorError)
