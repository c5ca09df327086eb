"""Every route of the sidebar API, registered on jupyter_server's web app."""

from __future__ import annotations

from typing import Any

from jupyter_server.utils import url_path_join

from deeptutor_jupyter.server import course_open, handlers, kb_api, mastery_api, memory_api

API = handlers.API


def setup_handlers(web_app: Any) -> None:
    base = url_path_join(web_app.settings["base_url"], API)
    routes: list[tuple[str, Any]] = [
        *memory_api.handlers(base),
        *kb_api.handlers(base),
        *mastery_api.handlers(base),
        *handlers.handlers(base),
        *course_open.handlers(web_app.settings["base_url"]),
    ]
    web_app.add_handlers(".*$", routes)
