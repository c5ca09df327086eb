"""``%tutor autoload``: after opting in once, ``%tutor`` works in a fresh kernel (issue 20).

A real kernel with its own IPYTHONDIR (kernel_env), restarted like a learner would.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deeptutor_jupyter.testing import FakeLLMServer
from tests.e2e.kernel_driver import KernelDriver

pytestmark = pytest.mark.e2e

STARTUP = Path("ipython") / "profile_default" / "startup" / "50-deeptutor-jupyter.py"


def tutor_works(k: KernelDriver) -> bool:
    """``%tutor help`` in this kernel: True if it answered, False if the magic is missing."""
    msg_id = k.kc.execute("%tutor help")
    reply = k.shell_reply(msg_id)
    k.wait_for(lambda: k._idle_after(msg_id))
    if reply["content"]["status"] != "ok":
        assert "UsageError" in reply["content"]["ename"], reply["content"]
        return False
    shown = "".join(
        m["content"].get("data", {}).get("text/markdown", "") for m in k.outputs_of(msg_id)
    )
    return "Commands:" in shown


def markdown(k: KernelDriver, code: str) -> str:
    msg_id = k.execute(code)
    return "".join(
        m["content"].get("data", {}).get("text/markdown", "") for m in k.outputs_of(msg_id)
    )


def test_autoload_is_off_by_default_on_after_opting_in_and_off_again(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    kernel.restart()
    assert not tutor_works(kernel)  # off by default: a fresh kernel has no %tutor
    assert not (tmp_path / STARTUP).exists()

    kernel.execute("%load_ext deeptutor_jupyter")
    assert "Autoload is **off**" in markdown(kernel, "%tutor autoload")
    assert "Autoload is **on**" in markdown(kernel, "%tutor autoload on")
    assert (tmp_path / STARTUP).is_file()
    kernel.restart()
    assert tutor_works(kernel)  # no %load_ext this time

    assert "Autoload is **off**" in markdown(kernel, "%tutor autoload off")
    assert not (tmp_path / STARTUP).exists()
    kernel.restart()
    assert not tutor_works(kernel)


def test_autoload_leaves_a_startup_file_it_did_not_write(
    kernel: KernelDriver, tmp_path: Path
) -> None:
    mine = tmp_path / STARTUP
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("print('my own startup')\n")
    assert "not written by the tutor" in markdown(kernel, "%tutor autoload on")
    assert "not written by the tutor" in markdown(kernel, "%tutor autoload off")
    assert mine.read_text() == "print('my own startup')\n"
