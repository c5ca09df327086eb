"""httpx without its command line when that cannot load anyway.

httpx's ``__init__`` imports its command line (``httpx._main``: click, pygments and rich) to
offer ``httpx.main``. Without all three installed that import fails and httpx falls back to a
``main`` that says to install ``httpx[cli]``, but only after click and pygments were imported:
~8 ms of a kernel's first request for nothing (issue 28). Marking ``httpx._main`` absent when
one of them is missing gives the same fallback without the cost; with all three installed,
httpx is left alone.
"""

from __future__ import annotations

import importlib.util
import sys

CLI_PACKAGES = ("rich", "pygments", "click")  # what httpx._main imports, the rarest first


def skip_unloadable_cli() -> bool:
    """Before httpx is first imported: True when its command line was marked absent."""
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return False  # too late, or already decided
    if all(importlib.util.find_spec(name) is not None for name in CLI_PACKAGES):
        return False  # it would load: httpx.main stays the real one
    sys.modules["httpx._main"] = None  # type: ignore[assignment]  # its import raises ImportError
    return True
