"""A course pack on the learner's disk: built by the instructor, installed read-only, verified.

``build_archive`` makes the reproducible .tar.gz that ``deeptutor-jupyter course publish`` sends
(hub/packs.py checks it again on the service). ``install`` checks a download against its listing
(SHA-256 of the archive, then size and SHA-256 of every file) and puts it under
``$DEEPTUTOR_HOME/course/<name>/v<version>/`` with files 0444 and folders 0555; ``installed``
returns only packs whose files still match. runtime/course.py keeps them current.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import stat
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from deeptutor_jupyter._files import atomic_write_text, move
from deeptutor_jupyter.errors import DeepTutorError

COURSE_DIR = "course"
PACK_FILE = "pack.json"


@dataclass(frozen=True)
class Pack:
    """An installed, verified pack."""

    name: str
    version: int
    group: str | None
    root: Path
    published_by: str

    @property
    def tutor_md(self) -> Path | None:
        path = self.root / "TUTOR.md"
        return path if path.is_file() else None

    @property
    def skills_dir(self) -> Path | None:
        path = self.root / "skills"
        return path if path.is_dir() else None

    @property
    def kb_name(self) -> str:
        return f"course-{self.name}"

    def label(self) -> str:
        return f"{self.name} v{self.version}"


class PackError(DeepTutorError):
    """A pack that could not be fetched or installed; the text names the pack, never the token."""

    code = "pack"


# --- building and publishing (the instructor's side) ----------------------------------------


def build_archive(folder: Path) -> bytes:
    """The folder as a reproducible .tar.gz: sorted, no owners, no times, hidden files left out.

    The same folder always gives the same bytes, so publishing it again is not a new version.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise PackError(f"{folder} is not a folder")
    import tarfile  # here, not at import: every first request imports this module (issue 28)

    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if any(part.startswith(".") for part in rel.parts) or "__pycache__" in rel.parts:
                continue
            if path.is_symlink():
                raise PackError(f"{rel} is a link; a pack holds only files and folders")
            if not path.is_file():
                continue
            data = path.read_bytes()
            info = tarfile.TarInfo(rel.as_posix())
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def publish(
    folder: Path, name: str, group: str | None, service_url: str, token: str
) -> dict[str, Any]:
    """PUT the folder to the course service; the service's answer, or PackError in its words."""
    import httpx

    from deeptutor_jupyter.providers.hub_link import hub_client

    archive = build_archive(folder)
    params = {"group": group} if group else {}
    try:
        with hub_client(timeout=60) as client:
            r = client.put(
                f"{service_url.rstrip('/')}/packs/{name}",
                content=archive,
                params=params,
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"},
            )
    except httpx.HTTPError as exc:
        raise PackError(f"the course service could not be reached ({type(exc).__name__})") from None
    if r.status_code not in (200, 201):
        raise PackError(message_of(r))
    result: dict[str, Any] = r.json()
    return result


def message_of(r: Any) -> str:
    try:
        return str(r.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"the course service answered {r.status_code}"


# --- installing (the student's side) --------------------------------------------------------


def course_root(home: Path) -> Path:
    return Path(home) / COURSE_DIR


def installed(home: Path) -> list[Pack]:
    """The packs installed under ``home`` whose files all match their manifest."""
    root = course_root(home)
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(root.iterdir()):
        listing = _read_listing(folder)
        if listing is None:
            continue
        pack = _verified(folder, listing)
        if pack is not None:
            out.append(pack)
    return out


def _read_listing(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / PACK_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# (folder, version) -> (stamps of everything under it, verified): hashed again only on a change.
_verified_cache: dict[tuple[str, int], tuple[tuple[Any, ...], bool]] = {}


def _verified(folder: Path, listing: Mapping[str, Any]) -> Pack | None:
    version = int(listing.get("version", 0))
    root = folder / f"v{version}"
    files = listing.get("files") or []
    try:
        # Every file and folder under the pack, listed or not: an added file is an edit too.
        stamps = tuple(
            (str(p), (st := p.stat()).st_size, st.st_mtime_ns, st.st_mode)
            for p in sorted([root, *root.rglob("*")])
        )
    except OSError:
        return None
    key = (str(folder), version)
    cached = _verified_cache.get(key)
    if cached is None or cached[0] != stamps:
        try:
            ok = all(_file_matches(root / f["path"], f) for f in files)
            ok = ok and _only_listed(root, files)
        except (KeyError, TypeError):  # a pack.json not written by install()
            ok = False
        _verified_cache[key] = (stamps, ok)
    if not _verified_cache[key][1]:
        return None
    return Pack(
        name=str(listing["name"]),
        version=version,
        group=listing.get("group"),
        root=root,
        published_by=str(listing.get("published_by", "")),
    )


def _file_matches(path: Path, entry: Mapping[str, Any]) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return len(data) == entry.get("size") and hashlib.sha256(data).hexdigest() == entry.get(
        "sha256"
    )


def _only_listed(root: Path, files: list[dict[str, Any]]) -> bool:
    listed = {str(f["path"]) for f in files}
    return all(p.relative_to(root).as_posix() in listed for p in root.rglob("*") if p.is_file())


def install(home: Path, listing: Mapping[str, Any], archive: bytes) -> Pack:
    """Check the archive against its listing and install it read-only; PackError if it does
    not match (nothing of it is kept then)."""
    name = str(listing["name"])
    if hashlib.sha256(archive).hexdigest() != listing.get("sha256"):
        raise PackError(f"pack {name}: the download does not match its SHA-256; not installed")
    folder = course_root(home) / name
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    version = int(listing["version"])
    staging = folder / f".incoming-{uuid.uuid4().hex}"
    try:
        _extract(archive, staging, listing.get("files") or [], name)
        target = folder / f"v{version}"
        if target.exists():
            _remove(target)
        _read_only(staging)
        move(staging, target)
    except BaseException:
        _remove(staging)
        raise
    # The listing last: a pack is installed once its pack.json names the new version.
    atomic_write_text(folder / PACK_FILE, json.dumps(dict(listing), sort_keys=True), mode=0o444)
    for old in folder.iterdir():
        if old.name.startswith("v") and old.name != f"v{version}":
            _remove(old)
    pack = _verified(folder, listing)
    if pack is None:
        raise PackError(f"pack {name}: installed files do not match the manifest")
    return pack


def _extract(archive: bytes, into: Path, files: list[dict[str, Any]], name: str) -> None:
    expected = {str(f["path"]): f for f in files}
    seen: set[str] = set()
    into.mkdir(mode=0o700)
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar:
            rel = PurePosixPath(member.name.removeprefix("./"))
            if member.isdir():
                continue
            path = rel.as_posix()
            if rel.is_absolute() or ".." in rel.parts or not member.isfile():
                raise PackError(f"pack {name}: {member.name!r} is not a plain file of the pack")
            entry = expected.get(path)
            data = tar.extractfile(member)
            content = data.read() if data is not None else b""
            if entry is None or not _content_matches(content, entry):
                raise PackError(f"pack {name}: {path} does not match the pack's manifest")
            target = into.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            target.write_bytes(content)
            seen.add(path)
    if seen != set(expected):
        raise PackError(f"pack {name}: files of the manifest are missing from the download")


def _content_matches(content: bytes, entry: Mapping[str, Any]) -> bool:
    return len(content) == entry.get("size") and (
        hashlib.sha256(content).hexdigest() == entry.get("sha256")
    )


def _read_only(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        path.chmod(0o555 if path.is_dir() else 0o444)
    root.chmod(0o555)


def _remove(path: Path) -> None:
    """Remove a read-only tree (its folders are given write permission back first)."""
    if not path.exists():
        return
    for folder in [path, *(p for p in path.rglob("*") if p.is_dir() and not p.is_symlink())]:
        folder.chmod(stat.S_IRWXU)
    shutil.rmtree(path, ignore_errors=True)


def uninstall(home: Path, name: str) -> None:
    _remove(course_root(home) / name)
    from deeptutor_jupyter.knowledge.base import KnowledgeBase, remove_kb

    if KnowledgeBase(home, f"course-{name}").folder.is_dir():
        remove_kb(home, f"course-{name}")


def index_kb(home: Path, pack: Pack) -> None:
    """The pack's ``kb/`` as the knowledge base ``course-<name>``, rebuilt for a new version."""
    from deeptutor_jupyter.knowledge.base import KnowledgeBase, remove_kb

    kb = KnowledgeBase(home, pack.kb_name)
    source = pack.root / "kb"
    if kb.folder.is_dir():
        if kb.info().get("sources") == [str(source)]:
            return
        remove_kb(home, pack.kb_name)
    if source.is_dir():
        KnowledgeBase(home, pack.kb_name).add_sources([source])


def kb_of(home: Path, pack: Pack) -> str | None:
    """The pack's knowledge base when it is built."""
    from deeptutor_jupyter.knowledge.base import KnowledgeBase

    return pack.kb_name if KnowledgeBase(home, pack.kb_name).folder.is_dir() else None
