"""An LMS launch lands on ``/deeptutor/course/open``: a course pack's notebook is copied into the
served folder once, and JupyterLab opens the student's copy (a real jupyter_server)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from deeptutor_jupyter.hub.packs import manifest_of
from deeptutor_jupyter.runtime.course_files import build_archive, install


def install_pack(home: Path, tmp: Path) -> None:
    folder = tmp / "calc"
    (folder / "kb").mkdir(parents=True)
    (folder / "TUTOR.md").write_text("# Calculus\n", encoding="utf-8")
    notebook = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (folder / "kb" / "week1.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    archive = build_archive(folder)
    listing = {
        "name": "calc",
        "version": 1,
        "group": None,
        "sha256": hashlib.sha256(archive).hexdigest(),
        "files": manifest_of(archive),
        "published_by": "ms-lee",
    }
    install(home, listing, archive)


def test_a_pack_notebook_is_copied_once_and_opened(
    run: Any, jp_fetch: Any, jp_root_dir: Path, home: Path, tmp_path: Path
) -> None:
    install_pack(home, tmp_path)
    opened = run(
        jp_fetch(
            "deeptutor", "course", "open", params={"notebook": "calc/kb/week1.ipynb"},
            follow_redirects=False, raise_error=False,
        )
    )  # fmt: skip
    assert opened.code == 302
    assert opened.headers["Location"].endswith("/lab/tree/course/calc/kb/week1.ipynb")
    copy = jp_root_dir / "course" / "calc" / "kb" / "week1.ipynb"
    assert json.loads(copy.read_text())["nbformat"] == 4
    copy.write_text('{"student": "work"}')  # the student's own work since
    again = run(
        jp_fetch(
            "deeptutor", "course", "open", params={"notebook": "calc/kb/week1.ipynb"},
            follow_redirects=False, raise_error=False,
        )
    )  # fmt: skip
    assert again.code == 302
    assert copy.read_text() == '{"student": "work"}'


@pytest.mark.parametrize(
    ("notebook", "status"),
    [("calc/../../etc/passwd.ipynb", 400), ("calc/kb/x.py", 400), ("calc/kb/none.ipynb", 404)],
)
def test_what_is_not_a_pack_notebook_is_refused(
    run: Any, jp_fetch: Any, home: Path, tmp_path: Path, notebook: str, status: int
) -> None:
    install_pack(home, tmp_path)
    with pytest.raises(HTTPClientError) as info:
        run(jp_fetch("deeptutor", "course", "open", params={"notebook": notebook}))
    assert info.value.code == status
