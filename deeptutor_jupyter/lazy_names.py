"""A package's names that load their submodule on first use (PEP 562 ``__getattr__``).

What a kernel's first request imports is kept lean (issue 28): a package whose every name was
imported at its own import made the request pay for code only a later step uses (the index
code of ``knowledge``, the edits of ``memory``). ``__getattr__ = lazy_names(__name__, {...})``
imports a name's submodule the first time the name is read, then keeps the value in the
package, so later reads cost nothing.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``where`` maps a name to the submodule defining it."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        vars(sys.modules[package])[name] = value
        return value

    return __getattr__
