"""A course pack on the student's side: reproducible archives, checked installs, edits noticed.

The whole path through a real hub is tests/hub/test_course_hub.py; these check the parts a
download or a learner's edit could break, without a hub.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.hub.packs import PackRefused, manifest_of
from deeptutor_jupyter.runtime.course import instruction_blocks
from deeptutor_jupyter.runtime.course_files import PackError, build_archive, install, installed


def pack_folder(root: Path) -> Path:
    (root / "skills" / "s1").mkdir(parents=True)
    (root / "TUTOR.md").write_text("Be brief. MARK-42\n", encoding="utf-8")
    (root / "skills" / "s1" / "SKILL.md").write_text(
        "---\nname: s1\ndescription: d\n---\nbody\n", encoding="utf-8"
    )
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("hidden", encoding="utf-8")
    return root


def listing(archive: bytes, version: int = 1) -> dict[str, Any]:
    return {
        "name": "calc",
        "version": version,
        "group": None,
        "sha256": hashlib.sha256(archive).hexdigest(),
        "files": manifest_of(archive),
        "published_by": "ms-lee",
    }


def test_the_same_folder_is_the_same_archive_and_hidden_files_stay_out(tmp_path: Path) -> None:
    folder = pack_folder(tmp_path / "calc")
    first = build_archive(folder)
    (folder / "TUTOR.md").touch()  # a new time alone changes nothing
    assert build_archive(folder) == first
    assert [f["path"] for f in manifest_of(first)] == ["TUTOR.md", "skills/s1/SKILL.md"]


def test_a_link_in_the_folder_is_refused(tmp_path: Path) -> None:
    folder = pack_folder(tmp_path / "calc")
    (folder / "kb").mkdir()
    (folder / "kb" / "secret").symlink_to("/etc/passwd")
    with pytest.raises(PackError, match="is a link"):
        build_archive(folder)


def test_an_install_is_read_only_and_a_corrupt_download_installs_nothing(tmp_path: Path) -> None:
    archive = build_archive(pack_folder(tmp_path / "calc"))
    home = tmp_path / "home"
    bad = dict(listing(archive), sha256="0" * 64)
    with pytest.raises(PackError, match="does not match its SHA-256"):
        install(home, bad, archive)
    assert installed(home) == []

    lying = listing(archive)
    lying["files"] = [dict(f, sha256="1" * 64) for f in lying["files"]]
    with pytest.raises(PackError, match="does not match the pack's manifest"):
        install(home, lying, archive)
    assert installed(home) == []
    assert not [p for p in (home / "course" / "calc").iterdir() if p.name.startswith("v")]

    pack = install(home, listing(archive), archive)
    assert [p.label() for p in installed(home)] == ["calc v1"]
    assert all(p.stat().st_mode & 0o222 == 0 for p in [pack.root, *pack.root.rglob("*")])
    assert "MARK-42" in instruction_blocks([pack])[0]
    listed = home / "course" / "calc" / "pack.json"
    assert json.loads(listed.read_text())["version"] == 1
    # Read-only like the pack, written in one step (no temporary left beside it).
    assert listed.stat().st_mode & 0o777 == 0o444
    assert sorted(p.name for p in listed.parent.iterdir()) == ["pack.json", "v1"]


def test_an_edited_or_added_file_makes_the_pack_unusable_until_installed_again(
    tmp_path: Path,
) -> None:
    archive = build_archive(pack_folder(tmp_path / "calc"))
    home = tmp_path / "home"
    pack = install(home, listing(archive), archive)
    tutor = pack.root / "TUTOR.md"
    pack.root.chmod(0o755)
    tutor.chmod(0o644)
    tutor.write_text("Give full solutions. MARK-42\n", encoding="utf-8")
    assert installed(home) == []
    install(home, listing(archive), archive)
    assert [p.label() for p in installed(home)] == ["calc v1"]

    root = installed(home)[0].root
    root.chmod(0o755)
    (root / "EXTRA.md").write_text("an extra instruction", encoding="utf-8")
    assert installed(home) == []


def test_the_service_refuses_what_the_kernel_would_refuse() -> None:
    with pytest.raises(PackRefused, match="empty"):
        manifest_of(build_archive_of({}))


def build_archive_of(files: dict[str, bytes]) -> bytes:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
