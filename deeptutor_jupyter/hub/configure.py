"""``configure(c, ...)``: the course service in ``jupyterhub_config.py`` in one call.

It adds what docs/hub.md spells out by hand:

- the managed service (``python -m deeptutor_jupyter.hub``) with its settings and the upstream
  key in the *service's* environment only (or the path of a key file readable by the hub user);
- a role giving every user ``access:services!service=<name>``, and the same scope on the tokens
  of students' servers (``c.Spawner.server_token_scopes``), so a kernel's
  ``JUPYTERHUB_API_TOKEN`` is accepted by the service;
- ``c.Spawner.environment`` entries that let a student's kernel find the service. The key is
  never among them.

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

# What a server token may do by default (JupyterHub's "server" role), plus reading the user's
# own groups so group limits apply.
_SERVER_SCOPES = ("users:activity!user", "access:servers!server", "read:users:groups!user")


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
    db_url: str | None = None,
    api_key_env: str = "DEEPTUTOR_UPSTREAM_API_KEY",
    api_key_file: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Add the course service to the hub config ``c`` and return the service entry.

    The key is taken from ``api_key_env`` in the hub's environment (the teacher exports it before
    starting the hub), or ``api_key_file`` names a file the service reads at start.
    ``kernel_url`` is how students' kernels reach the service; by default its own address
    (``http://<service_host>:<port>/services/<name>/v1``), on Kubernetes the hub's service name.
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
    service_env = {"DEEPTUTOR_HUB_CONFIG": json.dumps(settings)}
    if api_key_file:
        service_env["DEEPTUTOR_HUB_UPSTREAM_KEY_FILE"] = api_key_file
    elif env.get(api_key_env, "").strip():
        service_env["DEEPTUTOR_HUB_UPSTREAM_KEY"] = env[api_key_env].strip()
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
    scope = f"access:services!service={name}"
    current = _list(c.Spawner, "server_token_scopes") or list(_SERVER_SCOPES)
    c.Spawner.server_token_scopes = [*current, *(s for s in (scope,) if s not in current)]
    prefix = f"/services/{name}/"
    spawner_env = dict(_dict(c.Spawner, "environment"))
    spawner_env[SERVICE_URL_ENV] = kernel_url or f"http://{service_host}:{port}{prefix}v1"
    spawner_env[SERVICE_NAME_ENV] = name
    spawner_env[SERVICE_MODEL_ENV] = models[0]
    c.Spawner.environment = spawner_env
    return service


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
    c.JupyterHub.load_roles = roles


def _list(section: Any, key: str) -> list[Any]:
    return list(section[key]) if key in section else []


def _dict(section: Any, key: str) -> dict[str, Any]:
    return dict(section[key]) if key in section else {}
