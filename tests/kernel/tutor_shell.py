"""A terminal IPython with the extension loaded, for tests of magics without a kernel."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from IPython.core.interactiveshell import InteractiveShell


@contextmanager
def tutor_shell() -> Iterator[InteractiveShell]:
    """The shell after ``%load_ext deeptutor_jupyter``; its session closed and the singleton
    cleared after, so the next test gets a fresh one."""
    sh = InteractiveShell.instance()
    try:
        sh.run_line_magic("load_ext", "deeptutor_jupyter")
        yield sh
    finally:
        magics = sh.magics_manager.registry.get("TutorMagics")
        state = getattr(magics, "state", None)
        if state is not None:
            state.session.close()
        InteractiveShell.clear_instance()
