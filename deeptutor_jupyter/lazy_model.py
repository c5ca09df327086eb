"""The base of the models a kernel imports before its first request: built on first use.

pydantic builds a model's validator and serializer when its class is made, unless
``defer_build`` is set; then it builds them the first time the model validates, dumps or
gives its JSON Schema. Most models the kernel imports before a first turn's request (the
quiz's questions, the book's chapters, memory's operations, the events a turn emits later)
are not used before it leaves: building them all at import cost ~35 ms of a Run All's first
request (issue 28). Validation is the same either way; only when the work happens differs.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["LazyModel"]


class LazyModel(BaseModel):
    """A pydantic model built at first use (subclasses' own ``model_config`` merges in)."""

    model_config = ConfigDict(defer_build=True)
