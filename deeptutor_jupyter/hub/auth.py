"""Who is asking: a student's own JupyterHub API token, checked with the hub.

A student's kernel sends its ``JUPYTERHUB_API_TOKEN`` as the Bearer key. ``HubAuth`` asks the
hub's ``/hub/api/user`` with that token and caches the answer for ``auth_cache_seconds`` (so a
revoked token keeps working for at most that long). The token must carry the scope
``access:services!service=<name>``, which ``configure()`` grants to students' server tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from deeptutor_jupyter.errors import DeepTutorError


@dataclass(frozen=True)
class Identity:
    name: str
    groups: tuple[str, ...] = ()
    kind: str = "user"
    scopes: frozenset[str] = frozenset()


class NotAllowed(DeepTutorError):
    """The request is refused; ``status`` is 401 (no token) or 403 (a token that does not do)."""

    code = "not_allowed"

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class HubUnavailable(DeepTutorError):
    """The hub could not be asked; the student is not at fault."""

    code = "hub_unavailable"


class TokenChecker(Protocol):
    async def __call__(self, token: str) -> Identity | None: ...


def bearer_token(header: str | None) -> str | None:
    """The token of ``Authorization: Bearer x`` (or JupyterHub's ``token x``)."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() not in ("bearer", "token") or not value.strip():
        return None
    return value.strip()


def required_scope(service_name: str) -> str:
    return f"access:services!service={service_name}"


async def authorize(
    header: str | None, check: TokenChecker, service_name: str, scope_ok: Callable[[Identity], bool]
) -> Identity:
    """The student behind the request, or NotAllowed with words they can act on."""
    token = bearer_token(header)
    if token is None:
        raise NotAllowed(
            401,
            "no_token",
            "No hub token was sent. The tutor sends your JUPYTERHUB_API_TOKEN by itself when it "
            "runs in a server started by this hub.",
        )
    identity = await check(token)
    if identity is None:
        raise NotAllowed(403, "invalid_token", "The hub does not recognise this token.")
    if identity.kind != "user":
        raise NotAllowed(403, "not_a_user", "Only the hub's users can use the course's tutor.")
    if not scope_ok(identity):
        raise NotAllowed(
            403,
            "missing_scope",
            f"This token may not use the course's tutor (it lacks the scope "
            f"{required_scope(service_name)}). Ask your instructor to give you access.",
        )
    return identity


def hub_token_checker(cache_seconds: int) -> tuple[TokenChecker, Callable[[Identity, str], bool]]:
    """A checker backed by the hub (``JUPYTERHUB_API_URL``), and the scope test HubAuth uses."""
    from jupyterhub.services.auth import HubAuth, check_scopes
    from tornado.web import HTTPError

    hub_auth = HubAuth(cache_max_age=cache_seconds)

    async def check(token: str) -> Identity | None:
        try:
            model: Any = await hub_auth.user_for_token(token, use_cache=True, sync=False)
        except HTTPError as exc:
            raise HubUnavailable(str(exc.log_message or exc)) from None
        if not model:
            return None
        return Identity(
            name=str(model.get("name", "")),
            groups=tuple(model.get("groups") or ()),
            kind=str(model.get("kind", "user")),
            scopes=frozenset(model.get("scopes") or ()),
        )

    def has_scope(identity: Identity, scope: str) -> bool:
        return bool(check_scopes(scope, set(identity.scopes)))

    return check, has_scope
