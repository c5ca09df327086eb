"""Knowledge bases from the file browser: ``POST kbs`` indexes a folder or file in a thread.

The indexer is the kernel's (``KnowledgeBase.add_sources``, as ``%tutor kb add`` runs it); it
runs on a worker thread, never on the server's event loop. Its progress callback only writes a
few numbers into the job, so however often it fires, the Knowledge tab's poll of ``GET kbs``
(which lists the jobs beside the knowledge bases) is what sets the update rate.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from pydantic import ValidationError

from deeptutor_jupyter.knowledge import KnowledgeBase, validate_kb_name
from deeptutor_jupyter.server.api_models import (
    AddKnowledgeBaseRequest,
    JobReply,
    KbJob,
    KnowledgeState,
    dump,
)
from deeptutor_jupyter.server.handlers import TutorHandler, learner
from deeptutor_jupyter.server.reads import kb_list, remove_knowledge_base

MAX_JOBS = 20  # finished jobs kept for the tab to show; the oldest go first
_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="deeptutor-kb")


@dataclass
class Job:
    id: str
    name: str
    path: str  # as the learner gave it, relative to the server root
    home: str
    state: str = "running"  # running, done, failed
    done: int = 0
    total: int = 0
    current: str = ""
    summary: str = ""
    errors: list[str] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None

    def public(self) -> KbJob:
        out = asdict(self)
        del out["home"]
        return KbJob.model_validate(out)


_jobs: dict[str, Job] = {}
_lock = threading.Lock()


def jobs_of(home: Path) -> list[KbJob]:
    with _lock:
        return [job.public() for job in _jobs.values() if job.home == str(home)]


def _state(home: Path) -> dict[str, Any]:
    return dump(KnowledgeState.model_validate({"kbs": kb_list(home), "jobs": jobs_of(home)}))


def resolve_under(root: Path, relative: str) -> Path:
    """``relative`` inside ``root``, symlinks followed; ValueError in words otherwise."""
    if not isinstance(relative, str) or "\x00" in relative:
        raise ValueError("path must be text: a folder or file relative to the server's root.")
    base = root.resolve()
    target = (base / relative.lstrip("/")).resolve()
    if not target.is_relative_to(base):
        raise PermissionError(
            f"{relative!r} is outside the folder this Jupyter server serves; "
            "only files under it can be added."
        )
    if not target.exists():
        raise FileNotFoundError(f"{relative!r} does not exist under the server's root.")
    return target


def _busy(home: Path, name: str) -> bool:
    """Whether ``name`` is being indexed; the caller holds ``_lock``."""
    return any(
        j.name == name and j.home == str(home) and j.state == "running" for j in _jobs.values()
    )


def _running(home: Path, name: str) -> bool:
    with _lock:
        return _busy(home, name)


def _start(home: Path, root: Path, name: str, shown: str, target: Path) -> Job:
    job = Job(uuid.uuid4().hex[:12], name, shown, str(home))
    with _lock:
        if _busy(home, name):
            raise RuntimeError(f"The knowledge base {name!r} is being indexed already.")
        finished = [j for j in _jobs.values() if j.state != "running"]
        for old in sorted(finished, key=lambda j: j.started_at)[
            : max(0, len(_jobs) - MAX_JOBS + 1)
        ]:
            del _jobs[old.id]
        _jobs[job.id] = job
    _pool.submit(_run, job, home, root, target)
    return job


def _run(job: Job, home: Path, root: Path, target: Path) -> None:
    def progress(done: int, total: int, current: str) -> None:
        # Only stored (``current`` is relative to the knowledge base's root already): the
        # poll reads them at its own pace.
        job.done, job.total, job.current = done, total, current

    try:
        report = KnowledgeBase(home, job.name, root=root).add_sources([target], progress)
    except Exception as exc:  # shown in the tab; the index on disk is left as it was
        job.errors = [f"{type(exc).__name__}: {exc}"]
        job.state = "failed"
    else:
        job.summary, job.errors = report.summary(), list(report.errors)
        job.done = job.total = max(job.total, 1)
        job.state = "done"
    job.current = ""
    job.finished_at = time.time()


class KnowledgeHandler(TutorHandler):
    """``GET kbs``: the knowledge bases and the indexing jobs; ``POST kbs``: index a path."""

    @tornado.web.authenticated
    @authorized
    def get(self) -> None:
        self.reply(_state(learner().home))

    @tornado.web.authenticated
    @authorized
    def post(self) -> None:
        body, ok = self.read_json("The request")
        if not ok:
            return None
        try:
            asked = AddKnowledgeBaseRequest.model_validate(body, strict=True)
        except ValidationError:
            return self.refuse(400, "bad_request", 'Send {"name": "...", "path": "folder"}.')
        try:
            name = validate_kb_name(asked.name)
        except ValueError as exc:
            return self.refuse(400, "invalid", str(exc))
        root = Path(self.settings.get("server_root_dir") or Path.cwd()).expanduser()
        try:
            target = resolve_under(root, asked.path)
        except PermissionError as exc:
            return self.refuse(403, "outside_root", str(exc))
        except FileNotFoundError as exc:
            return self.refuse(404, "not_found", str(exc))
        except ValueError as exc:
            return self.refuse(400, "bad_request", str(exc))
        home = learner().home
        try:
            job = _start(home, root.resolve(), name, asked.path, target)
        except RuntimeError as exc:
            return self.refuse(409, "busy", str(exc))
        self.reply(dump(JobReply(job=job.public())), 202)


class KnowledgeBaseHandler(TutorHandler):
    """``DELETE kbs/<name>``: remove a knowledge base (its index; never the source files)."""

    @tornado.web.authenticated
    @authorized
    def delete(self, name: str) -> None:
        home = learner().home
        if _running(home, name):
            return self.refuse(
                409, "busy", f"{name!r} is being indexed; remove it when the indexing ends."
            )
        try:
            remove_knowledge_base(home, name)
        except LookupError as exc:  # KnowledgeBaseNotFound
            return self.refuse(404, "unknown", str(exc))
        except ValueError as exc:
            return self.refuse(400, "invalid", str(exc))
        self.reply(_state(home))


def handlers(base: str) -> list[tuple[str, type[TutorHandler]]]:
    return [
        (url_path_join(base, "kbs"), KnowledgeHandler),
        (url_path_join(base, r"kbs/([^/]+)"), KnowledgeBaseHandler),
    ]
