"""The hub's LTI 1.3 login: jupyterhub-ltiauthenticator, plus the checks a course needs.

``ltiauthenticator`` (1.6) runs the OIDC third-party login (``/hub/lti13/oauth_login``) and the
launch (``/hub/lti13/oauth_callback``): it checks the id_token's signature against the
platform's JWKS, its issuer, audience, expiry and age, and that its nonce is the one this
browser was given. What it leaves to us, and this module adds:

- **Replay.** Its nonce lives in a cookie, so a captured launch (form and cookies) can be posted
  again. Every nonce accepted here is remembered until the token could no longer pass the age
  check, and a second launch with it is refused.
- **Deployment.** The token must name one of the registered deployment ids.
- **Course group and instructors.** The LTI context joins the student to its hub group
  (``context_groups``, else ``lti-<context id>``); an instructor's role in the context puts
  them in ``instructors_group``, and a launch in another role takes them out. Groups are added,
  never replaced, so groups an admin gave stay.
- **Where the launch goes.** The service gets the launch as a note signed with the tool's key
  (``config.LTIConfig.note``): it records what the services need (hub/lti/routes.py) and sends
  the browser on to the notebook, or to the deep-linking picker.
"""

from __future__ import annotations

import threading
import time
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from jupyterhub import orm
from jupyterhub.utils import url_path_join
from ltiauthenticator.lti13.auth import LTI13Authenticator
from ltiauthenticator.lti13.constants import LTI13_GENERAL_REQUIRED_CLAIMS
from ltiauthenticator.lti13.error import MissingRequiredArgumentError
from ltiauthenticator.lti13.handlers import LTI13CallbackHandler
from ltiauthenticator.lti13.validator import LTI13LaunchValidator
from ltiauthenticator.utils import convert_request_to_dict
from tornado.web import HTTPError
from traitlets import Dict, Unicode, default

from deeptutor_jupyter.hub.lti.config import (
    AGS_CLAIM,
    DL,
    LTI,
    NRPS_CLAIM,
    LTIConfig,
    is_instructor,
)


class SeenNonces:
    """Nonces of accepted launches, each kept for as long as its token could be accepted."""

    def __init__(self) -> None:
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def first_use(self, nonce: str, keep_seconds: float) -> bool:
        now = time.monotonic()
        with self._lock:
            for old in [n for n, until in self._seen.items() if until < now]:
                del self._seen[old]
            if nonce in self._seen:
                return False
            self._seen[nonce] = now + keep_seconds
            return True


def _refuse(status: int, message: str) -> HTTPError:
    error = HTTPError(status, message)
    error.jupyterhub_message = message  # type: ignore[attr-defined]
    return error


class CourseLaunchValidator(LTI13LaunchValidator):  # type: ignore[misc]
    """ltiauthenticator 1.6 asks a deep-linking request for claims the spec leaves optional
    (``azp``, ``resource_link``, ``tool_platform``, ``launch_presentation``), so Canvas's and
    Moodle's deep links fail there. Deep linking is checked against the spec's list here."""

    def validate_id_token(self, id_token: dict[str, Any]) -> None:
        if id_token.get(LTI + "message_type") != "LtiDeepLinkingRequest":
            super().validate_id_token(id_token)
            return
        self._check_arg_not_missing(id_token, LTI13_GENERAL_REQUIRED_CLAIMS.keys())
        self._check_lti_version(id_token)
        self._check_if_iat_is_too_old(id_token)
        settings = id_token.get(DL + "deep_linking_settings")
        if not isinstance(settings, dict) or not settings.get("deep_link_return_url"):
            raise MissingRequiredArgumentError(
                "deep_linking_settings.deep_link_return_url is missing"
            )


class CourseLTICallbackHandler(LTI13CallbackHandler):  # type: ignore[misc]
    _launch: dict[str, Any] | None = None

    def decode_and_validate_launch_request(self) -> dict[str, Any]:
        """ltiauthenticator's steps (state, signature, claims, azp, nonce cookie) with the
        validator above, then the checks this module adds."""
        auth: CourseLTIAuthenticator = self.authenticator
        validator = CourseLaunchValidator(parent=self.app)
        args = convert_request_to_dict(self.request.arguments)
        validator.validate_auth_response(args)
        self.check_state()
        id_token: dict[str, Any] = validator.verify_and_decode_jwt(
            encoded_jwt=args.get("id_token"),
            issuer=auth.issuer,
            audience=auth.client_id,
            jwks_endpoint=auth.jwks_endpoint,
            jwks_algorithms=auth.jwks_algorithms,
        )
        validator.validate_id_token(id_token)
        validator.validate_azp_claim(id_token, auth.client_id)
        self.check_nonce(id_token)
        course = auth.course_config
        deployment = id_token.get(LTI + "deployment_id")
        if deployment not in course.deployment_ids:
            raise _refuse(
                400,
                "The launch comes from a deployment this hub does not know "
                f"({str(deployment)[:80]!r}). "
                "Ask the hub's administrator to add it to lti.deployment_ids.",
            )
        nonce = str(id_token.get("nonce") or "")
        keep = 600 + 60  # ltiauthenticator's max_age for iat, and a minute of clock drift
        if not nonce or not auth.seen_nonces.first_use(nonce, keep):
            raise _refuse(
                400, "This launch was already used (nonce replay). Launch again from the course."
            )
        self._launch = launch_of(id_token, course)
        return id_token

    async def redirect_to_next_url(self, user: Any) -> None:
        launch = self._launch or {}
        auth: CourseLTIAuthenticator = self.authenticator
        join_groups(self.db, user.orm_user, launch, auth.course_config)
        note = auth.course_config.note(user.name, launch)
        service = url_path_join(self.base_url, "services", auth.service_name, "lti", "launch")
        self.redirect(f"{service}?note={quote(note)}")


def launch_of(id_token: dict[str, Any], course: LTIConfig) -> dict[str, Any]:
    """What the service needs to know of a launch; nothing else of the token travels on."""
    context = id_token.get(LTI + "context") or {}
    custom = id_token.get(LTI + "custom") or {}
    target = str(id_token.get(LTI + "target_link_uri") or "")
    notebook = custom.get("notebook") if isinstance(custom, dict) else None
    if not notebook and target:
        notebook = next(iter(parse_qs(urlsplit(target).query).get("notebook", [])), None)
    ags = id_token.get(AGS_CLAIM) or {}
    nrps = id_token.get(NRPS_CLAIM) or {}
    settings = id_token.get(DL + "deep_linking_settings") or {}
    context_id = str(context.get("id", ""))[:255] if isinstance(context, dict) else ""
    return {
        "message": str(id_token.get(LTI + "message_type", "")),
        "lti_user": str(id_token.get("sub", ""))[:255],
        "context": {
            "id": context_id,
            "label": str(context.get("label", ""))[:255] if isinstance(context, dict) else "",
            "title": str(context.get("title", ""))[:255] if isinstance(context, dict) else "",
        },
        "group": course.group_for(context_id) if context_id else "",
        "instructor": is_instructor(id_token.get(LTI + "roles")),
        "resource_link": str((id_token.get(LTI + "resource_link") or {}).get("id", ""))[:255],
        "notebook": str(notebook)[:500] if notebook else "",
        "lineitems": str(ags.get("lineitems", "")) if isinstance(ags, dict) else "",
        "lineitem": str(ags.get("lineitem", "")) if isinstance(ags, dict) else "",
        "memberships": str(nrps.get("context_memberships_url", ""))
        if isinstance(nrps, dict)
        else "",
        "deep_link": {
            "return_url": str(settings.get("deep_link_return_url", "")),
            "data": settings.get("data"),
            "deployment_id": str(id_token.get(LTI + "deployment_id", "")),
        }
        if settings
        else None,
    }


def join_groups(db: Any, user: orm.User, launch: dict[str, Any], course: LTIConfig) -> None:
    """The context's group, and the instructors' group exactly when the launch's role says so."""
    wanted = [launch["group"]] if launch.get("group") else []
    if launch.get("instructor"):
        wanted.append(course.instructors_group)
    for name in wanted:
        group = orm.Group.find(db, name)
        if group is None:
            group = orm.Group(name=name)
            db.add(group)
        if group not in user.groups:
            user.groups.append(group)
    if not launch.get("instructor"):
        user.groups = [g for g in user.groups if g.name != course.instructors_group]
    db.commit()


class CourseLTIAuthenticator(LTI13Authenticator):  # type: ignore[misc]
    """``c.JupyterHub.authenticator_class``, set by ``configure(c, ..., lti={...})``."""

    callback_handler = CourseLTICallbackHandler

    course = Dict(config=True, help="The LTI settings (hub/lti/config.py: LTIConfig).")
    service_name = Unicode("deeptutor", config=True, help="The course service's name.")
    username_key = Unicode(
        "sub",
        config=True,
        help="The id_token claim that names the hub user; 'sub' works with LMS privacy settings.",
    )

    @default("allow_all")
    def _allow_all(self) -> bool:
        # The LMS decides who may launch; a valid launch is the permission.
        return True

    _config: LTIConfig | None = None
    seen_nonces = SeenNonces()

    @property
    def course_config(self) -> LTIConfig:
        if self._config is None:
            self._config = LTIConfig.model_validate(self.course)
        return self._config
