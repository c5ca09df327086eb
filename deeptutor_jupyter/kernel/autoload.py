"""``%tutor autoload on|off``: ``%tutor`` in every new kernel of this IPython profile.

After a kernel restart ``%tutor`` was gone until ``%load_ext`` ran again, so a card's own hint
"run ``%tutor pending``" answered "``%tutor`` not found" (issue 20). A learner who opts in gets a
startup file in the profile's ``startup`` directory (IPython runs those in every kernel and
terminal of the profile); ``off`` deletes it. Off by default: nothing is written unless asked,
which matters where a profile is shared. Loading the extension only registers the magic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FILE_NAME = "50-deeptutor-jupyter.py"
MARK = "# Written by `%tutor autoload on`; `%tutor autoload off` deletes this file."
STARTUP = f"""{MARK}
try:
    get_ipython().extension_manager.load_extension("deeptutor_jupyter")  # noqa: F821
except Exception as exc:  # never break a kernel's start for the tutor
    print(f"deeptutor_jupyter not loaded: {{exc}} (`%tutor autoload off` stops this)")
"""


def startup_file(shell: Any) -> Path:
    return Path(shell.profile_dir.startup_dir) / FILE_NAME


def autoload(shell: Any, turn_on: bool | None) -> str:
    """Turn it on or off (None: say whether it is on); the answer, as Markdown."""
    path = startup_file(shell)
    if turn_on is None:
        state = "on" if path.is_file() else "off"
        return (
            f"Autoload is **{state}** (`{path}`). `%tutor autoload on` loads the tutor in every "
            "new kernel of this IPython profile; `%tutor autoload off` stops it."
        )
    if not turn_on:
        if path.is_file():
            if MARK not in path.read_text(encoding="utf-8", errors="replace"):
                return f"⚠ `{path}` was not written by the tutor: left as it is."
            path.unlink()
            return (
                f"Autoload is **off**: deleted `{path}`. "
                "New kernels need `%load_ext deeptutor_jupyter`."
            )
        return "Autoload was already off."
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file() and MARK not in path.read_text(encoding="utf-8", errors="replace"):
            return f"⚠ `{path}` exists and was not written by the tutor: left as it is."
        path.write_text(STARTUP, encoding="utf-8")
    except OSError as exc:
        return f"⚠ Autoload not turned on: cannot write `{path}` ({exc.strerror or exc})."
    return (
        f"Autoload is **on**: `%tutor` works in every new kernel of this IPython profile "
        f"(`{path}`). `%tutor autoload off` stops it."
    )
