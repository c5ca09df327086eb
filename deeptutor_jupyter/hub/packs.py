"""Course packs: a folder an instructor publishes for a group, kept in the service's database.

A pack is a gzipped tar of a folder: ``TUTOR.md`` (the tutor's instructions; an ``## Objectives``
list there is the learning path), ``skills/<name>/SKILL.md`` and ``kb/`` (knowledge-base
sources). Every publication of a name gets the next version; students' kernels download the
latest version for their groups, check its SHA-256 and install it read-only
(runtime/course.py). Stored in SQL like the quotas, so every replica serves the same packs.

Only regular files and folders under relative paths are accepted: no links, devices, absolute
paths or ``..``; sizes are capped. A pack that contains the course's model key is refused, so a
slip of the teacher cannot hand the key to every student.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import re
import tarfile
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.hub.quota import metadata

if TYPE_CHECKING:
    from deeptutor_jupyter.learning.policy import PolicySource

EVERYONE = "*"
MAX_ARCHIVE_BYTES = 32 * 1024 * 1024
MAX_UNPACKED_BYTES = 128 * 1024 * 1024
MAX_FILES = 2000
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")
GROUP_RE = re.compile(r"^[\w.@+-]{1,255}$")
# What a pack is for; anything else is refused so a typo shows up at publication, not in class.
KNOWN_TOP = ("TUTOR.md", "skills", "kb", "README.md")

packs = sa.Table(
    "deeptutor_pack",
    metadata,
    sa.Column("name", sa.String(48), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("audience", sa.String(255), nullable=False),  # a hub group, or "*" for everyone
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("files", sa.Text, nullable=False),  # JSON: [{"path", "size", "sha256"}]
    sa.Column("archive", sa.LargeBinary, nullable=False),
    sa.Column("published_by", sa.String(255), nullable=False),
    sa.Column("published_at", sa.String(32), nullable=False),
)


class PackRefused(DeepTutorError, ValueError):
    """A publication that cannot be accepted, with the reason in the teacher's words."""

    code = "pack_refused"


@dataclass(frozen=True)
class PackInfo:
    name: str
    version: int
    audience: str
    sha256: str
    size: int
    files: list[dict[str, Any]]
    published_by: str
    published_at: str

    def public(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "group": None if self.audience == EVERYONE else self.audience,
            "sha256": self.sha256,
            "size": self.size,
            "files": self.files,
            "published_by": self.published_by,
            "published_at": self.published_at,
        }


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise PackRefused(
            f"A pack's name is 1 to 48 lower-case letters, digits, '-' or '_' (got {name!r})."
        )
    return name


def check_group(group: str | None) -> str:
    if not group or group == EVERYONE:
        return EVERYONE
    if not GROUP_RE.match(group):
        raise PackRefused(f"{group!r} is not a hub group name.")
    return group


def manifest_of(archive: bytes, secret: str | None = None) -> list[dict[str, Any]]:
    """The files of a pack archive (path, size, SHA-256), or PackRefused saying what is wrong."""
    if len(archive) > MAX_ARCHIVE_BYTES:
        raise PackRefused(f"The pack is larger than {MAX_ARCHIVE_BYTES // 2**20} MiB compressed.")
    files: list[dict[str, Any]] = []
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            for member in tar:
                path = safe_member_path(member.name)
                if member.isdir():
                    continue
                if not member.isfile():
                    raise PackRefused(f"{path} is not a regular file (links are not accepted).")
                if path.parts[0] not in KNOWN_TOP:
                    known = ", ".join(KNOWN_TOP)
                    raise PackRefused(f"{path}: a pack holds only {known}.")
                total += member.size
                if len(files) >= MAX_FILES or total > MAX_UNPACKED_BYTES:
                    raise PackRefused(
                        f"The pack holds more than {MAX_FILES} files or "
                        f"{MAX_UNPACKED_BYTES // 2**20} MiB."
                    )
                data = tar.extractfile(member)
                content = data.read() if data is not None else b""
                if secret and secret.encode() in content:
                    raise PackRefused(
                        f"{path} contains the course's model key; remove it before publishing."
                    )
                digest = hashlib.sha256(content).hexdigest()
                files.append({"path": str(path), "size": len(content), "sha256": digest})
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise PackRefused(f"The pack is not a readable .tar.gz archive ({exc}).") from None
    if not files:
        raise PackRefused("The pack is empty.")
    paths = [f["path"] for f in files]
    if len(set(paths)) != len(paths):
        raise PackRefused("The pack names a file twice.")
    return sorted(files, key=lambda f: str(f["path"]))


def safe_member_path(name: str) -> PurePosixPath:
    """A member's relative path; absolute paths and ``..`` are refused."""
    path = PurePosixPath(name.removeprefix("./"))
    if not name or path.is_absolute() or ".." in path.parts or "\\" in name:
        raise PackRefused(f"{name!r} leaves the pack's folder.")
    if not path.parts:
        return PurePosixPath(".")
    return path


class PackStore:
    """Publication and listing; each method is one short transaction on the service's engine."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self._objectives: dict[str, frozenset[str]] = {}  # by archive SHA-256
        self._policies: dict[str, PolicySource | None] = {}  # by archive SHA-256
        metadata.create_all(engine, tables=[packs])

    def publish(
        self, name: str, group: str | None, archive: bytes, by: str, secret: str | None = None
    ) -> tuple[PackInfo, bool]:
        """(the pack's latest version, whether it is new). The same content for the same group
        is not a new version, so publishing twice changes nothing for the students."""
        name, audience = check_name(name), check_group(group)
        files = manifest_of(archive, secret)
        policy = policy_of(archive, name)
        if policy is not None and policy.error:  # said now, not in class
            raise PackRefused(f"The AI policy cannot be read: {policy.error}")
        digest = hashlib.sha256(archive).hexdigest()
        content = json.dumps(files, sort_keys=True)
        stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        with self.engine.begin() as conn:
            latest = conn.execute(
                sa.select(packs.c.version, packs.c.audience, packs.c.files)
                .where(packs.c.name == name)
                .order_by(packs.c.version.desc())
                .limit(1)
            ).first()
            if latest is not None and (latest.audience, latest.files) == (audience, content):
                same = self._get(conn, name, int(latest.version))
                assert same is not None
                return same, False
            version = 1 if latest is None else int(latest.version) + 1
            row = {
                "name": name,
                "version": version,
                "audience": audience,
                "sha256": digest,
                "size": len(archive),
                "files": content,
                "archive": archive,
                "published_by": by,
                "published_at": stamp,
            }
            # Two instructors publishing at once: the primary key refuses the second version.
            conn.execute(packs.insert().values(**row))
        return PackInfo(name, version, audience, digest, len(archive), files, by, stamp), True

    def withdraw(self, name: str) -> int:
        """Remove every version of a pack; students' kernels drop it at their next check."""
        with self.engine.begin() as conn:
            return int(conn.execute(packs.delete().where(packs.c.name == name)).rowcount)

    def latest(self) -> list[PackInfo]:
        """The latest version of every pack, by name."""
        newest = (
            sa.select(packs.c.name, sa.func.max(packs.c.version).label("version"))
            .group_by(packs.c.name)
            .subquery()
        )
        query = (
            sa.select(*(c for c in packs.c if c.name != "archive"))
            .join(
                newest, sa.and_(packs.c.name == newest.c.name, packs.c.version == newest.c.version)
            )
            .order_by(packs.c.name)
        )
        with self.engine.connect() as conn:
            return [_info(row) for row in conn.execute(query)]

    def objectives(self) -> set[str]:
        """The objective ids the latest packs' TUTOR.md list (``## Objectives``), as the
        kernel computes them (runtime/course.py): the only ids a mastery report may name."""
        ids: set[str] = set()
        for info in self.latest():
            known = self._objectives.get(info.sha256)
            if known is None:
                found = self.archive(info.name, info.version)
                known = objectives_of(found[1]) if found is not None else frozenset()
                self._objectives[info.sha256] = known
            ids.update(known)
        return ids

    def policies(self, groups: tuple[str, ...]) -> list[PolicySource]:
        """The AI policies of the latest packs for these groups (the gateway enforces them)."""
        found = []
        for info in self.for_student(groups):
            if info.sha256 not in self._policies:
                got = self.archive(info.name, info.version)
                self._policies[info.sha256] = policy_of(got[1], info.name) if got else None
            if (policy := self._policies[info.sha256]) is not None:
                found.append(policy)
        return found

    def for_student(self, groups: tuple[str, ...]) -> list[PackInfo]:
        return [p for p in self.latest() if p.audience == EVERYONE or p.audience in groups]

    def archive(self, name: str, version: int) -> tuple[PackInfo, bytes] | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(packs).where(packs.c.name == name, packs.c.version == version)
            ).first()
        return (_info(row), bytes(row.archive)) if row is not None else None

    def _get(self, conn: sa.Connection, name: str, version: int) -> PackInfo | None:
        row = conn.execute(
            sa.select(*(c for c in packs.c if c.name != "archive")).where(
                packs.c.name == name, packs.c.version == version
            )
        ).first()
        return _info(row) if row is not None else None


def objectives_of(archive: bytes) -> frozenset[str]:
    from deeptutor_jupyter.learning.path import objectives_from_titles, objectives_in_tutor_md

    text = tutor_md_of(archive)
    if text is None:
        return frozenset()
    return frozenset(o.id for o in objectives_from_titles(objectives_in_tutor_md(text)))


def policy_of(archive: bytes, name: str) -> PolicySource | None:
    """The AI policy in the pack's TUTOR.md front matter (learning/policy.py), or None."""
    from deeptutor_jupyter.learning.policy import policy_in_text

    text = tutor_md_of(archive)
    return policy_in_text(text, f"pack {name}: TUTOR.md") if text is not None else None


def tutor_md_of(archive: bytes) -> str | None:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar:
            if member.isfile() and safe_member_path(member.name) == PurePosixPath("TUTOR.md"):
                handle = tar.extractfile(member)
                if handle is None:
                    return None
                return handle.read(MAX_UNPACKED_BYTES).decode("utf-8-sig", errors="replace")
    return None


def _info(row: Any) -> PackInfo:
    return PackInfo(
        name=str(row.name),
        version=int(row.version),
        audience=str(row.audience),
        sha256=str(row.sha256),
        size=int(row.size),
        files=json.loads(row.files),
        published_by=str(row.published_by),
        published_at=str(row.published_at),
    )
