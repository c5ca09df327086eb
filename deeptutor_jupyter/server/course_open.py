"""``GET /deeptutor/course/open?notebook=<pack>/<path>``: where an LMS launch lands in the
student's server (hub/lti/routes.py sends the browser here through ``/hub/user-redirect``).

The notebook comes from a course pack: the installed copy is brought up to date with the course
service first (runtime/course.py), then copied to ``course/<pack>/<path>`` under the
folder the server serves, and JupyterLab opens the copy. The copy is the student's own: a
second launch opens it as they left it, never over their work. The installed pack itself stays
read-only.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path, PurePosixPath

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_escape, url_path_join

from deeptutor_jupyter.config import resolve_settings

PACK_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")


def pack_notebook(value: str) -> tuple[str, PurePosixPath] | None:
    """``calc/kb/week1.ipynb`` as (pack, path inside it), or None when it is not one."""
    pack, _, rest = value.partition("/")
    path = PurePosixPath(rest)
    if not PACK_NAME.match(pack) or not rest or path.is_absolute() or ".." in path.parts:
        return None
    if path.suffix != ".ipynb" or len(value) > 500:
        return None
    return pack, path


def copy_for_student(home: Path, root: Path, pack: str, path: PurePosixPath) -> str | None:
    """The student's copy of the notebook (made now if missing), relative to ``root``."""
    from deeptutor_jupyter.runtime.course_files import installed

    source = next((p.root / path for p in installed(home) if p.name == pack), None)
    if source is None or not source.is_file():
        return None
    # The pack's path is kept, so the kernel knows which pack notebook this is a copy of
    # (runtime/course.py: course_notebook) and its quiz scores reach the notebook's line item.
    relative = PurePosixPath("course") / pack / path
    target = root / relative
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)  # a copy is writable: the pack's file is 0444
    return str(relative)


class CourseNotebookHandler(JupyterHandler):
    auth_resource = "contents"

    @tornado.web.authenticated
    @authorized
    async def get(self) -> None:
        wanted = pack_notebook(self.get_argument("notebook", ""))
        if wanted is None:
            raise tornado.web.HTTPError(400, "notebook must name a course pack's .ipynb")
        home = resolve_settings().settings.home
        from deeptutor_jupyter.runtime.course import sync_for

        sync = sync_for(home)
        if sync is not None:
            await asyncio.to_thread(sync.check)  # the course's latest version, not last week's
        root = Path(self.contents_manager.root_dir)
        relative = await asyncio.to_thread(copy_for_student, home, root, *wanted)
        if relative is None:
            note = f" ({sync.last_error})" if sync is not None and sync.last_error else ""
            raise tornado.web.HTTPError(
                404, f"The course has no notebook {'/'.join(map(str, wanted))}{note}."
            )
        self.redirect(url_path_join(self.base_url, "lab", "tree", url_escape(relative)))


def handlers(base_url: str) -> list[tuple[str, type[JupyterHandler]]]:
    return [(url_path_join(base_url, "deeptutor", "course", "open"), CourseNotebookHandler)]
