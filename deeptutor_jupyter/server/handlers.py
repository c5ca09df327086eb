"""HTTP handlers of the sidebar API: ``/deeptutor/api/{pending,memory,kbs,traces,language}``.

Every handler requires an authenticated and authorized user (``@tornado.web.authenticated`` and
``@authorized`` with the ``deeptutor`` resource); jupyter_server's ``APIHandler`` checks XSRF on
every request that is not token-authenticated. Bodies and answers are JSON; a refused answer
says why in words and with the coordinator's ``code`` (unknown, foreign_session, duplicate,
expired, invalid, not_resumable), and changes nothing.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from pydantic import ValidationError

from deeptutor_jupyter import limits
from deeptutor_jupyter.config import resolve_settings, save_lab_language
from deeptutor_jupyter.interaction.coordinator import (
    InteractionCoordinator,
    InteractionError,
    resolved_fields,
)
from deeptutor_jupyter.memory.store import MemoryStore
from deeptutor_jupyter.runtime.home import open_home
from deeptutor_jupyter.server.api_models import DocumentsReply, SaveMemoryRequest, dump
from deeptutor_jupyter.server.reads import (
    memory_documents,
    pending_questions,
    pending_quizzes,
    save_memory_document,
    traces,
)
from deeptutor_jupyter.store.db import Store

API = "deeptutor/api"
# The HTTP status of each refusal; the body carries the code and the coordinator's words.
STATUS_OF_CODE = {
    "unknown": 404,
    "foreign_session": 403,
    "duplicate": 409,
    "expired": 410,
    "invalid": 400,
    "not_resumable": 409,
}


@dataclass
class Learner:
    """The learner's store and coordinator, opened once per ``$DEEPTUTOR_HOME``."""

    home: Path
    store: Store
    coordinator: InteractionCoordinator


_learners: dict[Path, Learner] = {}
_lock = threading.Lock()


def learner() -> Learner:
    """Settings are read per request (cheap), so a changed home is picked up without restart."""
    settings = resolve_settings().settings
    home = settings.home
    with _lock:
        found = _learners.get(home)
        if found is None:
            # The kernel's session opens its home the same way (runtime/home.py).
            opened = open_home(
                home,
                # Directory answers are checked against the folder the server serves.
                workspace=Path.cwd(),
                expiry_seconds=settings.ask_timeout_hours * 3600,
            )
            found = _learners[home] = Learner(home, opened.store, opened.coordinator)
        return found


class TutorHandler(APIHandler):
    auth_resource = "deeptutor"

    def reply(self, body: dict[str, Any], status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body, ensure_ascii=False))

    def refuse(self, status: int, code: str, message: str) -> None:
        self.reply({"code": code, "message": message}, status)

    def read_json(self, what: str) -> tuple[Any, bool]:
        """The request's JSON body and True, or False after refusing it in words.

        Bounded in bytes and in depth: a deeply nested body made ``json.loads`` raise
        RecursionError, which the server turned into a 500.
        """
        raw = self.request.body or b"{}"
        if len(raw) > limits.JSON_BODY_BYTES:
            size = limits.too_long(what, len(raw), limits.JSON_BODY_BYTES, "bytes")
            self.refuse(413, "too_large", size)
            return None, False
        try:
            body = json.loads(raw)
        except RecursionError:
            body = _TOO_DEEP
        except ValueError:
            self.refuse(400, "bad_request", f"{what} is not valid JSON.")
            return None, False
        if body is _TOO_DEEP or _depth(body) > limits.JSON_DEPTH:
            self.refuse(
                400,
                "bad_request",
                f"{what} is nested too deeply; the limit is {limits.JSON_DEPTH} levels.",
            )
            return None, False
        return body, True


_TOO_DEEP = object()


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in a parsed JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


class PendingHandler(TutorHandler):
    @tornado.web.authenticated
    @authorized
    def get(self) -> None:
        who = learner()
        self.reply(
            {
                "pending": pending_questions(who.store, who.coordinator),
                "quizzes": pending_quizzes(who.store, who.coordinator),
            }
        )


class AnswerHandler(TutorHandler):
    @tornado.web.authenticated
    @authorized
    def post(self, request_id: str) -> None:
        body, ok = self.read_json("The answer")
        if not ok:
            return None
        problem = _answer_problem(body)
        if problem:
            return self.refuse(400, "bad_request", problem)
        who = learner()
        try:
            result = who.coordinator.submit(
                body["session_id"],
                request_id,
                list(body.get("selections") or []),
                str(body.get("custom_input") or ""),
                bool(body.get("cancelled", False)),
            )
        except InteractionError as exc:
            return self.refuse(STATUS_OF_CODE.get(exc.code, 400), exc.code, str(exc))
        # The turn goes on in the kernel that asked: the panel says where ("continues in ...").
        row = who.store.get_pending(request_id)
        where = row.place or {} if row is not None else {}
        self.reply({"result": resolved_fields(result), "continues_in": where})


def _answer_problem(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "The answer must be a JSON object."
    if not isinstance(body.get("session_id"), str) or not body["session_id"]:
        return "The answer needs the question's session_id."
    selections = body.get("selections", [])
    if not isinstance(selections, list) or not all(isinstance(s, str) for s in selections):
        return "selections must be a list of option ids."
    if not isinstance(body.get("custom_input", ""), str):
        return "custom_input must be text."
    if not isinstance(body.get("cancelled", False), bool):
        return "cancelled must be true or false."
    return None


class MemoryHandler(TutorHandler):
    @tornado.web.authenticated
    @authorized
    def get(self) -> None:
        self.reply(_documents(learner().home))


def _documents(home: Path, **more: Any) -> dict[str, Any]:
    return dump(DocumentsReply.model_validate({"documents": memory_documents(home), **more}))


class MemoryDocumentHandler(TutorHandler):
    """``PUT memory/<layer>/<key>``: a human's edit of one document, checked before it is saved;
    ``DELETE``: the learner removes it."""

    @tornado.web.authenticated
    @authorized
    def put(self, layer: str, key: str) -> None:
        body, ok = self.read_json("The document")
        if not ok:
            return None
        try:
            text = SaveMemoryRequest.model_validate(body, strict=True).text
        except ValidationError:
            return self.refuse(400, "bad_request", 'Send the document as {"text": "..."}.')
        try:
            save_memory_document(learner().home, layer, key, text)
        except ValueError as exc:  # DocumentError is one: the text says which line and why
            return self.refuse(400, "invalid", str(exc))
        self.reply(_documents(learner().home))

    @tornado.web.authenticated
    @authorized
    def delete(self, layer: str, key: str) -> None:
        """The whole document goes (an L3 one becomes empty); its entries are logged."""
        home = learner().home
        try:
            removed = MemoryStore(home).delete_document(layer, key)
        except ValueError as exc:
            return self.refuse(400, "invalid", str(exc))
        self.reply(_documents(home, removed=removed))


class TracesHandler(TutorHandler):
    @tornado.web.authenticated
    @authorized
    def get(self) -> None:
        raw = self.get_argument("limit", "50")
        if not raw.isdigit() or not 0 < int(raw) <= 1000:
            return self.refuse(400, "bad_request", "limit must be a whole number from 1 to 1000.")
        self.reply({"traces": traces(learner().home, int(raw))})


class LanguageHandler(TutorHandler):
    """JupyterLab's display language, reported by the labextension at start: the kernels' forms
    follow it unless the learner set a language (config.py ``resolve_settings``)."""

    @tornado.web.authenticated
    @authorized
    def put(self) -> None:
        body, ok = self.read_json("The language report")
        if not ok:
            return None
        code = body.get("language") if isinstance(body, dict) else None
        if not isinstance(code, str) or not 0 < len(code) <= 40:
            return self.refuse(400, "bad_request", 'Send {"language": "<JupyterLab locale>"}.')
        home = resolve_settings().settings.home
        self.reply({"language": save_lab_language(home, code)})


def handlers(base: str) -> list[tuple[str, type[TutorHandler]]]:
    return [
        (url_path_join(base, "pending"), PendingHandler),
        (url_path_join(base, r"pending/([A-Za-z0-9_\-]+)"), AnswerHandler),
        (url_path_join(base, "memory"), MemoryHandler),
        (url_path_join(base, r"memory/(L2|L3)/([a-z][a-z0-9_-]{0,31})"), MemoryDocumentHandler),
        (url_path_join(base, "traces"), TracesHandler),
        (url_path_join(base, "language"), LanguageHandler),
    ]
