"""The course service's LTI routes (only when the service's settings have ``lti``).

- ``GET lti/jwks.json``: the tool's public key, which the LMS registers.
- ``GET lti/launch?note=...``: where the hub sends a browser after a valid launch. The note is
  signed by the tool's key (hub/lti/authenticator.py), so only the hub can write one. The
  service records who the student is in the LMS and where the context's services are, then
  sends the browser to the notebook the resource link names, or (deep linking, instructors
  only) shows the course packs' notebooks to pick from.
- ``POST lti/deep-link``: the instructor's pick, answered as the deep-linking response the
  LMS expects: a JWT signed by the tool's key, auto-posted to the LMS's return URL.
"""

from __future__ import annotations

import html
import json
import time
import uuid
from typing import Any
from urllib.parse import quote

from tornado.web import RequestHandler

from deeptutor_jupyter.hub.gateway import GatewayState
from deeptutor_jupyter.hub.lti.config import DL, LTI, LTIConfig, LTIConfigError
from deeptutor_jupyter.hub.lti.state import LTIState

MAX_NOTE = 16 << 10


class _LTIPage(RequestHandler):
    state: GatewayState

    def initialize(self, state: GatewayState) -> None:
        self.state = state

    def check_xsrf_cookie(self) -> None:
        # The signed note is the credential here; the LMS posts across sites by design.
        return None

    @property
    def lti(self) -> LTIState:
        assert self.state.lti is not None
        return self.state.lti

    def page(self, status: int, title: str, body: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(
            f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}'
            f"</title></head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
        )

    def launch(self, note: str) -> tuple[str, dict[str, Any]] | None:
        if not note or len(note) > MAX_NOTE:
            self.page(400, "Launch again from your course", "<p>This link carries no launch.</p>")
            return None
        try:
            return self.lti.config.read_note(note)
        except LTIConfigError as exc:
            self.page(400, "Launch again from your course", f"<p>{html.escape(str(exc))}</p>")
            return None


class JwksHandler(_LTIPage):
    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(self.lti.config.jwks()))


class LaunchHandler(_LTIPage):
    async def get(self) -> None:
        found = self.launch(self.get_argument("note", ""))
        if found is None:
            return
        student, launch = found
        await self.state.db(self.lti.store.record_launch, student, launch)
        if launch.get("message") != "LtiDeepLinkingRequest":
            self.redirect(self.lti.notebook_url(str(launch.get("notebook") or "")))
            return
        if not launch.get("instructor") or not launch.get("deep_link"):
            self.page(
                403,
                "Only instructors choose",
                "<p>Only the course's instructors pick which notebook an assignment opens.</p>",
            )
            return
        notebooks = await self.notebooks()
        note = html.escape(self.get_argument("note"))
        choices = "".join(
            f'<li><label><input type="radio" name="notebook" value="{html.escape(n)}"'
            f"{' checked' if i == 0 else ''}> {html.escape(n)}</label></li>"
            for i, n in enumerate(notebooks)
        )
        if not choices:
            self.page(
                200,
                "No notebooks yet",
                "<p>The course's packs hold no notebook (.ipynb) "
                "yet. Publish a pack with notebooks under kb/ and launch again.</p>",
            )
            return
        self.page(
            200,
            "Which notebook does this assignment open?",
            f'<form method="post" action="deep-link"><input type="hidden" name="note" '
            f'value="{note}"><ul>{choices}</ul><label><input type="checkbox" name="graded" '
            'value="1" checked> Send its quiz scores to the gradebook</label> '
            "<button>Add to the course</button></form>",
        )

    async def notebooks(self) -> list[str]:
        packs = await self.state.db(self.state.packs.latest) if self.state.packs else []
        return pack_notebooks(packs)


def pack_notebooks(packs: list[Any]) -> list[str]:
    return sorted(
        f"{p.name}/{f['path']}" for p in packs for f in p.files if str(f["path"]).endswith(".ipynb")
    )


class DeepLinkHandler(LaunchHandler):
    async def get(self) -> None:
        self.page(405, "Pick from the list", "<p>Launch the deep link again from the course.</p>")

    async def post(self) -> None:
        found = self.launch(self.get_body_argument("note", ""))
        if found is None:
            return
        _, launch = found
        settings = launch.get("deep_link") or {}
        if not launch.get("instructor") or not settings:
            self.page(
                403, "Only instructors choose", "<p>Launch the deep link as an instructor.</p>"
            )
            return
        notebook = self.get_body_argument("notebook", "")
        if notebook not in await self.notebooks():
            self.page(400, "Pick a notebook", "<p>That notebook is not in the course's packs.</p>")
            return
        return_url = str(settings.get("return_url", ""))
        if not return_url.startswith(("https://", "http://")):
            self.page(400, "Launch again from your course", "<p>The LMS gave no return URL.</p>")
            return
        token = deep_link_response(
            self.lti.config,
            launch,
            notebook,
            target=f"{self.request.protocol}://{self.request.host}{self.lti.hub_base}hub/",
            graded=bool(self.get_body_argument("graded", "")),
        )
        self.page(
            200,
            "Adding the notebook to your course",
            f'<form id="f" method="post" action="{html.escape(return_url)}">'
            f'<input type="hidden" name="JWT" value="{html.escape(token)}">'
            "<button>Continue</button></form>"
            '<script>document.getElementById("f").submit()</script>',
        )


def deep_link_response(
    config: LTIConfig, launch: dict[str, Any], notebook: str, *, target: str, graded: bool
) -> str:
    """The LtiDeepLinkingResponse: one resource link that opens ``notebook`` when launched."""
    now = int(time.time())
    title = notebook.rsplit("/", 1)[-1].removesuffix(".ipynb")
    item: dict[str, Any] = {
        "type": "ltiResourceLink",
        "title": title,
        "url": f"{target}?notebook={quote(notebook, safe='')}",
        "custom": {"notebook": notebook},
    }
    if graded:
        # The LMS makes the gradebook column; launches of the link then name it (AGS lineitem).
        item["lineItem"] = {"scoreMaximum": 1, "label": title, "resourceId": notebook}
    settings = launch.get("deep_link") or {}
    claims: dict[str, Any] = {
        "iss": config.client_id,
        "aud": config.issuer,
        "iat": now,
        "exp": now + 300,
        "nonce": uuid.uuid4().hex,
        LTI + "message_type": "LtiDeepLinkingResponse",
        LTI + "version": "1.3.0",
        LTI + "deployment_id": str(settings.get("deployment_id", "")),
        DL + "content_items": [item],
    }
    if settings.get("data") is not None:
        claims[DL + "data"] = settings["data"]
    return config.sign(claims)


def lti_routes(prefix: str, state: GatewayState) -> list[Any]:
    args = {"state": state}
    return [
        (prefix + "lti/jwks.json", JwksHandler, args),
        (prefix + "lti/launch", LaunchHandler, args),
        (prefix + "lti/deep-link", DeepLinkHandler, args),
    ]
