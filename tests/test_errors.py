"""One exception root: every public exception class of the package is a ``DeepTutorError`` with
a ``code`` and keeps its builtin base for older ``except`` clauses.

The classes are found by importing every module of the package, not from a hand-kept list: a new
error outside the root fails here. A module that cannot be imported fails too, unless it needs an
optional dependency that is not installed, and then the test says which (never silently).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import deeptutor_jupyter
from deeptutor_jupyter import DeepTutorError

# Modules that run something when imported: a program's entry point, not a library module.
ENTRY_POINTS = {"deeptutor_jupyter.hub.__main__"}
# What pyproject's extras add (hub, lab) and the server extension's host: a module that needs
# one of them and finds it missing is reported by test_every_module_was_scanned, never dropped.
OPTIONAL = {"sqlalchemy", "aiohttp", "jupyterhub", "psycopg", "jupyterlab", "jupyter_server"}


def modules() -> tuple[list[ModuleType], list[str]]:
    found: list[ModuleType] = []
    missing: list[str] = []
    names = pkgutil.walk_packages(deeptutor_jupyter.__path__, "deeptutor_jupyter.")
    for info in names:
        if info.name in ENTRY_POINTS:
            continue
        try:
            found.append(importlib.import_module(info.name))
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] not in OPTIONAL:
                raise
            missing.append(f"{info.name} (needs {exc.name})")
    return found, missing


MODULES, MISSING = modules()


def public_errors() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in MODULES:
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__  # defined there, not imported
                and not name.startswith("_")
            ):
                found[f"{module.__name__}.{name}"] = value
    return [found[k] for k in sorted(found)]


ERRORS = public_errors()


def test_every_module_was_scanned() -> None:
    if MISSING:  # a skip with the modules' names, shown in the summary
        pytest.skip(f"not scanned, optional dependency missing: {', '.join(MISSING)}")
    assert len(MODULES) > 100  # the walk found the package, not an empty path


def test_the_scan_finds_the_errors_of_every_layer() -> None:
    names = {cls.__name__ for cls in ERRORS}
    # One of each layer, and the four once missed by a hand-kept list.
    expected = {"StoreError", "ProviderError", "InteractionError", "SkillError"}
    expected |= {"AttachmentError", "BadAction", "PathError", "PackError"}
    assert expected <= names


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_each_public_error_has_the_root_and_a_code(cls: type[BaseException]) -> None:
    assert issubclass(cls, DeepTutorError), f"{cls.__module__}.{cls.__name__} is outside the root"
    code = cls.code
    assert isinstance(code, str) and code


def test_the_builtin_bases_are_kept() -> None:
    from deeptutor_jupyter.kernel.attachments import AttachmentError
    from deeptutor_jupyter.kernel.comm_messages import BadAction
    from deeptutor_jupyter.learning.path import PathError
    from deeptutor_jupyter.store.db import StoreError

    for cls in (AttachmentError, BadAction, PathError):
        assert issubclass(cls, ValueError)
    assert issubclass(StoreError, RuntimeError)


def test_codes_name_one_case_each() -> None:
    """A code names one case: a class may repeat only an ancestor's code (``StoreUnavailable``
    is a ``StoreError``; ``InteractionError`` keeps the root's generic "error")."""
    owners: dict[str, list[type[BaseException]]] = {}
    for cls in [DeepTutorError, *ERRORS]:
        if "code" in vars(cls):
            owners.setdefault(vars(cls)["code"], []).append(cls)
    for code, classes in owners.items():
        for cls in classes:
            others = [o for o in classes if o is not cls and not issubclass(cls, o)]
            unrelated = [o for o in others if not issubclass(o, cls)]
            assert not unrelated, (code, cls, unrelated)


def test_the_root_is_exported_and_a_provider_error_carries_its_kind_as_code() -> None:
    from deeptutor_jupyter.providers.base import ProviderError

    assert "DeepTutorError" in deeptutor_jupyter.__all__
    error = ProviderError("auth", "The key was rejected.")
    assert error.code == "auth" and isinstance(error, DeepTutorError)
