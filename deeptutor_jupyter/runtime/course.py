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
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from deeptutor_jupyter.runtime.course_files import (
    Pack,
    PackError,
    course_root,
    index_kb,
    install,
    installed,
    kb_of,
    message_of,
    uninstall,
)

if TYPE_CHECKING:
    from deeptutor_jupyter.config import HubService

FIRST_WAIT = 20.0
REFRESH = 300.0
TIMEOUT = 15.0


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

        from deeptutor_jupyter.providers.hub_link import hub_client

        headers = {"Authorization": f"Bearer {self.token}"}
        with hub_client(base_url=self.service.url, headers=headers, timeout=TIMEOUT) as client:
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
                raise PackError(f"the course service refused to list packs: {message_of(r)}")
            listed = {str(p["name"]): p for p in r.json().get("packs", [])}
            have = {p.name: p for p in installed(self.home)}
            for name, entry in listed.items():
                current = have.get(name)
                if current is None or current.version != int(entry["version"]):
                    got = client.get(f"/packs/{name}/{int(entry['version'])}")
                    if got.status_code != 200:
                        raise PackError(f"pack {name} could not be downloaded: {message_of(got)}")
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
    from deeptutor_jupyter.config import hub_service, hub_token

    env = os.environ if environ is None else environ
    service = hub_service(env)
    if service is None:
        return None
    token = hub_token(env)
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


def budget_status(environ: Mapping[str, str] | None = None) -> str:
    """``%tutor budget``: today's tokens used, held and left, from the service (Markdown)."""
    import datetime as dt

    import httpx

    from deeptutor_jupyter.config import hub_service, hub_token
    from deeptutor_jupyter.providers.hub_link import hub_client

    env = os.environ if environ is None else environ
    service = hub_service(env)
    if service is None:
        return "No course service: your budget is your provider's (docs/hub.md)."
    try:
        with hub_client(env, timeout=TIMEOUT) as client:
            r = client.get(
                f"{service.url}/usage", headers={"Authorization": f"Bearer {hub_token(env)}"}
            )
        r.raise_for_status()
        data = r.json()
        used, held = int(data["used_today"]), int(data["held_now"])
        daily = data["limits"]["daily_tokens"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        return f"⚠ The course service did not say ({type(exc).__name__}); try again later."
    now = dt.datetime.now(dt.UTC)
    midnight = (now + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    hours, minutes = divmod(int((midnight - now).total_seconds()) // 60, 60)
    head = f"**Today's tutor budget** (course service `{service.name}`): "
    if daily is None:
        return head + f"no daily limit; {used:,} tokens used today."
    left = max(0, int(daily) - used - held)
    running = f", {held:,} held by answers still running" if held else ""
    return (
        head + f"{used:,} of {int(daily):,} tokens used{running}, **{left:,} left**. "
        f"It resets at 00:00 UTC (in {hours} h {minutes} min)."
    )


TUTOR_MD_CHARS = 20_000


def instruction_blocks(packs: list[Pack]) -> list[str]:
    """The course's TUTOR.md of each pack, for the system prompt, before any folder's own."""
    blocks = []
    for pack in packs:
        if pack.tutor_md is None:
            continue
        text = _tutor_md(pack.tutor_md)[:TUTOR_MD_CHARS]
        by = f", published by {pack.published_by}" if pack.published_by else ""
        blocks.append(
            f"Instructions of the course (pack {pack.label()}{by}). Follow them; a TUTOR.md "
            f"in the learner's folders, if any, comes after and adds to them:\n{text.strip()}"
        )
    return blocks


def _tutor_md(path: Path) -> str:
    """A pack's TUTOR.md as far as anything keeps of it (limits.TUTOR_MD_BYTES)."""
    from deeptutor_jupyter._files import read_head
    from deeptutor_jupyter.limits import TUTOR_MD_BYTES

    try:
        return read_head(path, TUTOR_MD_BYTES).decode("utf-8-sig", errors="replace")
    except OSError:
        return ""


def course_objectives(home: Path) -> set[str]:
    """The ids of the objectives the course's packs list (their TUTOR.md ``## Objectives``):
    the same ids ``%tutor learn`` gives a path proposed from them."""
    from deeptutor_jupyter.learning.path import objectives_from_titles, objectives_in_tutor_md

    ids: set[str] = set()
    for pack in installed(home):
        if pack.tutor_md is not None:
            text = _tutor_md(pack.tutor_md)
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
    if not report:
        return None
    return _post_in_background("mastery", dict(report), environ)


def course_notebook(notebook: str) -> str | None:
    """The pack notebook (``calc/kb/week1.ipynb``) a student's copy under ``course/`` is of
    (server/course_open.py copies it to ``course/calc/kb/week1.ipynb``), else None."""
    path = notebook.replace("\\", "/")
    if "/course/" in path:
        path = path.rsplit("/course/", 1)[1]
    elif path.startswith("course/"):
        path = path[len("course/") :]
    else:
        return None
    return path if path.endswith(".ipynb") and "/" in path else None


def send_quiz_score(
    notebook: str, right: float, questions: int, environ: Mapping[str, str] | None = None
) -> threading.Thread | None:
    """A course notebook's quiz result (points of questions, and the pack notebook's path) for the
    course's gradebook (hub/lti/routes.py queues it for the notebook's line item, if any)."""
    source = course_notebook(notebook)
    if source is None or questions <= 0:
        return None
    body = {"notebook": source, "score": float(right), "maximum": float(questions)}
    return _post_in_background("scores", body, environ)


def send_review(
    objective: str, right: float, questions: int, environ: Mapping[str, str] | None = None
) -> threading.Thread | None:
    """A spaced review of a course objective, as numbers, for the course's learning records."""
    if questions <= 0:
        return None
    body = {"kind": "review", "objective": objective, "score": float(right),
            "maximum": float(questions)}  # fmt: skip
    return _post_in_background("scores", body, environ)


def _post_in_background(
    path: str, body: dict[str, object], environ: Mapping[str, str] | None
) -> threading.Thread | None:
    from deeptutor_jupyter.config import hub_service, hub_token

    env = os.environ if environ is None else environ
    service = hub_service(env)
    if service is None:
        return None
    token = hub_token(env)

    def post() -> None:
        import httpx

        from deeptutor_jupyter.providers.hub_link import hub_client

        with contextlib.suppress(httpx.HTTPError), hub_client(env, timeout=TIMEOUT) as client:
            client.post(
                f"{service.url}/{path}", json=body, headers={"Authorization": f"Bearer {token}"}
            )

    thread = threading.Thread(target=post, name=f"deeptutor-{path}", daemon=True)
    thread.start()
    return thread
