"""The course's packs in a student's kernel, and the numbers it shares with the course.

A JupyterHub that runs the course service (deeptutor_jupyter/hub) tells each kernel where the
service is (``DEEPTUTOR_HUB_SERVICE_URL``) and gives it the student's hub token. With those:

- **Packs.** The kernel asks ``GET packs`` which packs are meant for the student, downloads a
  new version, checks its SHA-256 against the listing and each file against the pack's manifest,
  and installs it under ``$DEEPTUTOR_HOME/course/<name>/v<version>/`` read-only (files 0444,
  folders 0555). A pack's ``kb/`` becomes the knowledge base ``course-<name>``. Each turn uses
  the installed packs (runtime/plan.py): the TUTOR.md as the course's instructions, the skills
  as the course layer, the knowledge base selected. An installed file that no longer matches
  its manifest makes the pack unusable until the next check installs it again. A home with no
  pack yet waits for the first check before its first turn (at most ``FIRST_WAIT`` s);
  otherwise checks run in the background, at most every ``REFRESH`` s, and the next turn sees
  what they installed. With the hub unreachable, the installed packs go on working.
- **Mastery.** After a graded quiz the kernel posts its mastery of the course's objectives (those
  its packs list; a learner's own objectives stay private) to ``mastery``: per objective the
  probability and the number of graded answers, never answers. Not when the learner set
  ``share_progress = false``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.config import HubService

COURSE_DIR = "course"
PACK_FILE = "pack.json"
FIRST_WAIT = 20.0
REFRESH = 300.0
TIMEOUT = 15.0
TOKEN_ENV = "JUPYTERHUB_API_TOKEN"


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


class PackError(Exception):
    """A pack that could not be fetched or installed; the text names the pack, never the token."""


# --- building and publishing (the instructor's side) ----------------------------------------


def build_archive(folder: Path) -> bytes:
    """The folder as a reproducible .tar.gz: sorted, no owners, no times, hidden files left out.

    The same folder always gives the same bytes, so publishing it again is not a new version.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise PackError(f"{folder} is not a folder")
    buffer = io.BytesIO()
    import gzip

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

    archive = build_archive(folder)
    params = {"group": group} if group else {}
    try:
        r = httpx.put(
            f"{service_url.rstrip('/')}/packs/{name}",
            content=archive,
            params=params,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"},
            timeout=60,
        )
    except httpx.HTTPError as exc:
        raise PackError(f"the course service could not be reached ({type(exc).__name__})") from None
    if r.status_code not in (200, 201):
        raise PackError(_message(r))
    result: dict[str, Any] = r.json()
    return result


def _message(r: Any) -> str:
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
        os.replace(staging, target)
    except BaseException:
        _remove(staging)
        raise
    # The listing last: a pack is installed once its pack.json names the new version.
    tmp = folder / f".{PACK_FILE}.{uuid.uuid4().hex}"
    tmp.write_text(json.dumps(dict(listing), sort_keys=True), encoding="utf-8")
    tmp.chmod(0o444)
    os.replace(tmp, folder / PACK_FILE)
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


# --- keeping them current -------------------------------------------------------------------


@dataclass
class CourseSync:
    """One learner home's packs kept current with the course service, from a worker thread."""

    home: Path
    service: HubService
    token: str
    last_check: float = 0.0
    last_error: str = ""
    checked_once: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        """Check in the background unless a check runs or ran within REFRESH seconds."""
        with self._lock:
            due = time.monotonic() - self.last_check >= REFRESH or not self.checked_once.is_set()
            if (self._thread is not None and self._thread.is_alive()) or not due:
                return
            self._thread = threading.Thread(target=self.check, name="deeptutor-course", daemon=True)
            self._thread.start()

    def check(self) -> None:
        """Install what is new, drop what was withdrawn; errors are kept for ``%tutor course``."""
        try:
            self._check()
            self.last_error = ""
        except PackError as exc:
            self.last_error = str(exc)
        except Exception as exc:  # a broken pack must never break the tutor
            self.last_error = f"the course's packs could not be checked ({type(exc).__name__})"
        finally:
            self.last_check = time.monotonic()
            self.checked_once.set()

    def _check(self) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.service.url, headers=headers, timeout=TIMEOUT) as client:
            try:
                r = client.get("/packs")
            except httpx.HTTPError as exc:
                raise PackError(
                    f"the course service could not be reached ({type(exc).__name__}); "
                    "the installed packs are used"
                ) from None
            if r.status_code == 404:
                return  # a service without packs
            if r.status_code != 200:
                raise PackError(f"the course service refused to list packs: {_message(r)}")
            listed = {str(p["name"]): p for p in r.json().get("packs", [])}
            have = {p.name: p for p in installed(self.home)}
            for name, entry in listed.items():
                current = have.get(name)
                if current is None or current.version != int(entry["version"]):
                    got = client.get(f"/packs/{name}/{int(entry['version'])}")
                    if got.status_code != 200:
                        raise PackError(f"pack {name} could not be downloaded: {_message(got)}")
                    current = install(self.home, entry, got.content)
                index_kb(self.home, current)
            root = course_root(self.home)
            for folder in root.iterdir() if root.is_dir() else ():
                if (
                    folder.is_dir()
                    and not folder.name.startswith(".")
                    and folder.name not in listed
                ):
                    uninstall(self.home, folder.name)  # withdrawn by the instructor


_syncs: dict[str, CourseSync] = {}
_syncs_lock = threading.Lock()


def sync_for(home: Path, environ: Mapping[str, str] | None = None) -> CourseSync | None:
    """The home's sync with the course service, when this kernel was spawned by such a hub."""
    from deeptutor_jupyter.config import hub_service

    env = os.environ if environ is None else environ
    service = hub_service(env)
    if service is None:
        return None
    token = env.get(TOKEN_ENV, "").strip()
    with _syncs_lock:
        sync = _syncs.get(str(home))
        if sync is None or sync.service != service or sync.token != token:
            sync = _syncs[str(home)] = CourseSync(Path(home), service, token)
    return sync


def course_packs(home: Path, *, wait: float = FIRST_WAIT) -> list[Pack]:
    """The packs for this turn. Only a home with none installed yet waits for the first check
    (up to ``wait``); otherwise the check runs in the background and the next turn sees it."""
    sync = sync_for(home)
    if sync is None:
        return []
    sync.start()
    packs = installed(home)
    if packs or sync.checked_once.is_set():
        return packs
    sync.checked_once.wait(wait)
    return installed(home)


def course_status(home: Path) -> str:
    """``%tutor course``: check now, then say which packs this kernel uses (Markdown)."""
    sync = sync_for(home)
    if sync is None:
        return (
            "No course service: this kernel was not started by a JupyterHub that runs one "
            "(docs/hub.md). Course packs arrive from there."
        )
    sync.last_check = -REFRESH  # due now
    sync.checked_once.clear()
    sync.start()
    sync.checked_once.wait(FIRST_WAIT)
    packs = installed(home)
    lines = [f"**Course packs** from hub service `{sync.service.name}`:", ""]
    for p in packs:
        parts = ["TUTOR.md" if p.tutor_md else "", "skills" if p.skills_dir else ""]
        kb = kb_of(home, p)
        parts.append(f"knowledge base `{kb}`" if kb else "")
        holds = ", ".join(x for x in parts if x) or "no files the tutor uses"
        lines.append(f"- `{p.label()}` ({holds}), read-only in `{p.root}`")
    if not packs:
        lines.append("- none for you yet")
    if sync.last_error:
        lines += ["", f"⚠ {sync.last_error}"]
    return "\n".join(lines)


TUTOR_MD_CHARS = 20_000


def instruction_blocks(packs: list[Pack]) -> list[str]:
    """The course's TUTOR.md of each pack, for the system prompt, before any folder's own."""
    blocks = []
    for pack in packs:
        if pack.tutor_md is None:
            continue
        text = pack.tutor_md.read_bytes().decode("utf-8-sig", errors="replace")[:TUTOR_MD_CHARS]
        by = f", published by {pack.published_by}" if pack.published_by else ""
        blocks.append(
            f"Instructions of the course (pack {pack.label()}{by}). Follow them; a TUTOR.md "
            f"in the learner's folders, if any, comes after and adds to them:\n{text.strip()}"
        )
    return blocks


def course_objectives(home: Path) -> set[str]:
    """The ids of the objectives the course's packs list (their TUTOR.md ``## Objectives``):
    the same ids ``%tutor learn`` gives a path proposed from them."""
    from deeptutor_jupyter.learning.path import objectives_from_titles, objectives_in_tutor_md

    ids: set[str] = set()
    for pack in installed(home):
        if pack.tutor_md is not None:
            text = pack.tutor_md.read_bytes().decode("utf-8-sig", errors="replace")
            ids.update(o.id for o in objectives_from_titles(objectives_in_tutor_md(text)))
    return ids


def course_kbs(home: Path, packs: list[Pack]) -> list[str]:
    return [kb for pack in packs if (kb := kb_of(home, pack)) is not None]


# --- mastery: numbers only ------------------------------------------------------------------


def send_mastery(
    report: Mapping[str, Mapping[str, float | int]], environ: Mapping[str, str] | None = None
) -> threading.Thread | None:
    """Post ``{objective: {"p": probability, "n": graded answers}}`` to the course service in
    the background (None: no service, or nothing to report). Failures are quiet: the learner's
    own progress is unaffected, and the next graded quiz sends the whole picture again."""
    from deeptutor_jupyter.config import hub_service

    env = os.environ if environ is None else environ
    service = hub_service(env)
    if service is None or not report:
        return None
    token = env.get(TOKEN_ENV, "").strip()

    def post() -> None:
        import httpx

        with contextlib.suppress(httpx.HTTPError):
            httpx.post(
                f"{service.url}/mastery",
                json=dict(report),
                headers={"Authorization": f"Bearer {token}"},
                timeout=TIMEOUT,
            )

    thread = threading.Thread(target=post, name="deeptutor-mastery", daemon=True)
    thread.start()
    return thread
