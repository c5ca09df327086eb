"""The front-end modules as the kernel sends them (answer_stream.esm_source): without comments
and indentation, still the same program."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from deeptutor_jupyter.kernel.widgets import answer_stream
from deeptutor_jupyter.kernel.widgets.answer_stream import esm_source


def _sent_through_esm_source(path: Path) -> bool:
    module = path.with_suffix(".py")
    return module.exists() and f'esm_source(Path(__file__).with_name("{path.name}"))' in (
        module.read_text("utf-8")
    )


SENT = [
    p
    for p in sorted(Path(answer_stream.__file__).parent.glob("*.js"))
    if _sent_through_esm_source(p)
]


def test_the_sent_modules_have_no_string_across_lines() -> None:
    # esm_source strips each line: a template literal over several lines would lose its
    # indentation, and a line in it starting with // would be dropped as a comment.
    assert {p.name for p in SENT} >= {"answer_stream.js", "status_line.js"}
    for path in SENT:
        for literal in re.findall(r"`[^`]*`", path.read_text("utf-8")):
            assert "\n" not in literal, (path.name, literal)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_sent_modules_still_parse(tmp_path: Path) -> None:
    for path in SENT:
        sent = tmp_path / f"{path.stem}.mjs"
        sent.write_text(esm_source(path), encoding="utf-8")
        checked = subprocess.run(["node", "--check", str(sent)], capture_output=True, text=True)
        assert checked.returncode == 0, (path.name, checked.stderr)
        assert "//" not in "".join(line[:2] for line in sent.read_text().splitlines())
