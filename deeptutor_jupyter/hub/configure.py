"""``configure(c, ...)``: the course service in ``jupyterhub_config.py`` in one call.

It adds what docs/hub.md spells out by hand:

- the managed service (``python -m deeptutor_jupyter.hub``) with its settings and the upstream
  key in the *service's* environment only (or the path of a key file readable by the hub user);
- a role giving every user ``access:services!service=<name>``;
- ``c.Spawner.environment`` entries that let a student's kernel find the service, and
  ``DEEPTUTOR_HUB_TOKEN``: a token minted at each spawn that may use this service and read the
  user's groups, nothing else. The kernel sends it instead of the server's
  ``JUPYTERHUB_API_TOKEN``, which opens the student's server: whoever receives a request meant
  for the service (on a one-machine hub, a student's process that bound the service's port
  while it restarted) gets no more than tutor access as that student. The key is never among
  the entries.

This module imports nothing beyond the standard library, so ``jupyterhub_config.py`` stays quick.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

# The variables a student's kernel reads (deeptutor_jupyter/config.py: hub_service()).
SERVICE_URL_ENV = "DEEPTUTOR_HUB_SERVICE_URL"
SERVICE_NAME_ENV = "DEEPTUTOR_HUB_SERVICE_NAME"
SERVICE_MODEL_ENV = "DEEPTUTOR_HUB_MODEL"
SERVICE_MODELS_ENV = "DEEPTUTOR_HUB_MODELS"  # every model offered: the panel's model chooser
KERNEL_TOKEN_ENV = "DEEPTUTOR_HUB_TOKEN"
# On one machine: the service's Unix socket and its uid (providers/hub_link.py).
SERVICE_SOCKET_ENV = "DEEPTUTOR_HUB_SERVICE_SOCKET"
SERVICE_UID_ENV = "DEEPTUTOR_HUB_SERVICE_UID"


class KernelToken:
    """A ``c.Spawner.environment`` value: the kernel's token for the service, minted per spawn.

    It may use the service and read the user's own groups (so group limits apply), nothing
    more. The previous spawn's token of the same server is deleted, so tokens do not pile up.
    """

    def __init__(self, service: str) -> None:
        self.scopes = [f"access:services!service={service}", "read:users:groups!user"]
        self.note = f"deeptutor kernel token ({service})"

    def __call__(self, spawner: Any) -> str:
        user = spawner.user
        note = f"{self.note} {spawner.name or ''}".strip()
        for old in list(user.api_tokens):
            if old.note == note:
                user.db.delete(old)
        user.db.commit()
        return str(user.new_api_token(scopes=self.scopes, note=note))


def configure(
    c: Any,
    *,
    upstream_url: str,
    models: Iterable[str],
    daily_tokens: int | None = 50_000,
    requests_per_minute: int | None = 20,
    groups: Mapping[str, Mapping[str, int | None]] | None = None,
    instructors: Iterable[str] = (),
    instructor_groups: Iterable[str] = (),
    name: str = "deeptutor",
    port: int = 10101,
    service_host: str = "127.0.0.1",
    kernel_url: str | None = None,
    socket_dir: str | None = None,
    db_url: str | None = None,
    api_key_env: str = "DEEPTUTOR_UPSTREAM_API_KEY",
    api_key_file: str | None = None,
    environ: Mapping[str, str] | None = None,
    lti: Mapping[str, Any] | None = None,
    xapi: Mapping[str, Any] | None = None,
    lrs_password_env: str = "DEEPTUTOR_LRS_PASSWORD",
) -> dict[str, Any]:
    """Add the course service to the hub config ``c`` and return the service entry.

    The key is taken from ``api_key_env`` in the hub's environment (the teacher exports it before
    starting the hub), or ``api_key_file`` names a file the service reads at start.
    ``kernel_url`` is how students' kernels reach the service; by default its own address
    (``http://<service_host>:<port>/services/<name>/v1``), on Kubernetes the hub's service name.
    Without ``kernel_url`` (servers on the hub's machine) kernels reach the service through a
    Unix socket in ``socket_dir`` (default ``/run/deeptutor-hub`` when the hub runs as root),
    a folder only the service's user may write, and check its holder's uid; never its port.
    ``lti`` registers an LMS (docs/lms.md): the hub then logs students in by LTI 1.3 launch.
    ``xapi`` names a learning record store; its password is read from ``lrs_password_env``.
    """
    env = os.environ if environ is None else environ
    models = [m.strip() for m in models if m and m.strip()]
    if not models:
        raise ValueError("configure(models=[...]) needs at least one model name to offer")
    settings = {
        "upstream_url": upstream_url,
        "models": models,
        "limits": {"daily_tokens": daily_tokens, "requests_per_minute": requests_per_minute},
        "groups": {g: dict(v) for g, v in (groups or {}).items()},
        "instructors": sorted(set(instructors)),
        "instructor_groups": sorted(set(instructor_groups)),
    }
    if db_url:
        settings["db_url"] = db_url
    socket_path = None if kernel_url else _socket_path(socket_dir, name)
    if lti is not None:
        settings["lti"] = dict(lti)
        group = str(lti.get("instructors_group", "lti-instructors"))
        settings["instructor_groups"] = sorted({*settings["instructor_groups"], group})
        _lti_login(c, dict(lti), name)
    if xapi is not None:
        settings["xapi"] = dict(xapi)
    service_env = {"DEEPTUTOR_HUB_CONFIG": json.dumps(settings)}
    if xapi is not None and env.get(lrs_password_env, "").strip():
        service_env["DEEPTUTOR_HUB_LRS_PASSWORD"] = env[lrs_password_env].strip()
    if api_key_file:
        service_env["DEEPTUTOR_HUB_UPSTREAM_KEY_FILE"] = api_key_file
    elif env.get(api_key_env, "").strip():
        service_env["DEEPTUTOR_HUB_UPSTREAM_KEY"] = env[api_key_env].strip()
    if socket_path:
        service_env["DEEPTUTOR_HUB_SOCKET"] = socket_path
    service = {
        "name": name,
        "url": f"http://{service_host}:{port}",
        "command": [sys.executable, "-m", "deeptutor_jupyter.hub"],
        "environment": service_env,
        "oauth_no_confirm": True,
        "display": True,
        "info": {"description": "Tutor usage and quotas (instructors)"},
    }
    c.JupyterHub.services = [s for s in _list(c.JupyterHub, "services") if s.get("name") != name]
    c.JupyterHub.services.append(service)
    _add_roles(c, name)
    prefix = f"/services/{name}/"
    spawner_env = dict(_dict(c.Spawner, "environment"))
    spawner_env[SERVICE_URL_ENV] = kernel_url or f"http://{service_host}:{port}{prefix}v1"
    spawner_env[SERVICE_NAME_ENV] = name
    spawner_env[SERVICE_MODEL_ENV] = models[0]
    spawner_env[SERVICE_MODELS_ENV] = ",".join(models)
    spawner_env[KERNEL_TOKEN_ENV] = KernelToken(name)
    if socket_path:
        spawner_env[SERVICE_SOCKET_ENV] = socket_path
        # A managed service runs as the hub's user: only that uid may hold the socket.
        spawner_env[SERVICE_UID_ENV] = str(os.geteuid())
    c.Spawner.environment = spawner_env
    return service


def _socket_path(socket_dir: str | None, name: str) -> str:
    if socket_dir is None:
        # /run is root's; a hub run as another user names a folder its students can reach.
        socket_dir = "/run/deeptutor-hub" if os.geteuid() == 0 else os.path.abspath("deeptutor-run")
    if not os.path.isabs(socket_dir):
        raise ValueError(f"configure(socket_dir={socket_dir!r}) must be an absolute path")
    return os.path.join(socket_dir, f"{name}.sock")


def _lti_login(c: Any, lti: dict[str, Any], name: str) -> None:
    """The hub logs users in by LTI 1.3 launch (hub/lti/authenticator.py)."""
    c.JupyterHub.authenticator_class = (
        "deeptutor_jupyter.hub.lti.authenticator.CourseLTIAuthenticator"
    )
    auth = c.CourseLTIAuthenticator
    auth.course = lti
    auth.service_name = name
    auth.issuer = lti.get("issuer", "")
    auth.client_id = {lti.get("client_id", "")}
    auth.jwks_endpoint = lti.get("jwks_url", "")
    auth.authorize_url = lti.get("auth_url", "")


def _add_roles(c: Any, name: str) -> None:
    scope = f"access:services!service={name}"
    roles = [r for r in _list(c.JupyterHub, "load_roles") if r.get("name") != "user"]
    user_role = next(
        (r for r in _list(c.JupyterHub, "load_roles") if r.get("name") == "user"), None
    )
    # Redefining the "user" role reaches every user, present and future; keep what it had.
    scopes = list((user_role or {}).get("scopes", ["self"]))
    if scope not in scopes:
        scopes.append(scope)
    roles.append({**(user_role or {}), "name": "user", "scopes": scopes})
    # The service reads groups, to warn an instructor who publishes a pack to an empty one.
    own = f"{name}-service"
    roles = [r for r in roles if r.get("name") != own]
    roles.append({"name": own, "scopes": ["list:groups", "read:groups"], "services": [name]})
    c.JupyterHub.load_roles = roles


def _list(section: Any, key: str) -> list[Any]:
    return list(section[key]) if key in section else []


def _dict(section: Any, key: str) -> dict[str, Any]:
    return dict(section[key]) if key in section else {}
