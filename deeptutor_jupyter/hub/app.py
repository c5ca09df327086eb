"""The service process: ``python -m deeptutor_jupyter.hub`` as JupyterHub starts it.

JupyterHub gives a managed service ``JUPYTERHUB_SERVICE_URL`` (where to listen),
``JUPYTERHUB_SERVICE_PREFIX`` (the path the proxy forwards, e.g. ``/services/deeptutor/``),
``JUPYTERHUB_API_URL`` and its own ``JUPYTERHUB_API_TOKEN``; our settings come from
``DEEPTUTOR_HUB_CONFIG`` and the key from its own variable or file (hub/settings.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from pydantic import SecretStr
from tornado.web import Application

from deeptutor_jupyter.hub.auth import hub_token_checker
from deeptutor_jupyter.hub.gateway import ChatCompletionsHandler, GatewayState, ModelsHandler
from deeptutor_jupyter.hub.instructor import instructor_routes, student_routes
from deeptutor_jupyter.hub.kernel_socket import SOCKET_ENV, bind_kernel_socket
from deeptutor_jupyter.hub.lease import keep
from deeptutor_jupyter.hub.mastery import MasteryStore, ReportLimiter
from deeptutor_jupyter.hub.pack_routes import hub_group_counter, pack_routes
from deeptutor_jupyter.hub.packs import PackStore
from deeptutor_jupyter.hub.policy_routes import policy_routes
from deeptutor_jupyter.hub.quota import QuotaStore, make_engine
from deeptutor_jupyter.hub.settings import (
    LRS_PASSWORD_ENV,
    GatewayConfig,
    ServiceConfigError,
    load_config,
    upstream_key,
)

log = logging.getLogger("deeptutor.hub")


def make_app(state: GatewayState, prefix: str, *, oauth: bool = True) -> Application:
    """The tornado application; ``oauth=False`` leaves out the browser pages (benchmarks)."""
    prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    args = {"state": state}
    routes: list[Any] = [
        (prefix + "v1/chat/completions", ChatCompletionsHandler, args),
        (prefix + "v1/models", ModelsHandler, args),
        *student_routes(prefix, state),
    ]
    if state.packs is not None:
        routes += pack_routes(prefix, state)
    routes += policy_routes(prefix, state)
    if state.lti is not None:
        from deeptutor_jupyter.hub.lti.routes import lti_routes

        routes += lti_routes(prefix, state)
    if state.lti is not None or state.xapi is not None:
        from deeptutor_jupyter.hub.scores import score_routes

        routes += score_routes(prefix, state)
    settings: dict[str, Any] = {}
    if oauth:
        routes += instructor_routes(prefix, state)
        settings["cookie_secret"] = os.urandom(32)
    return Application(routes, **settings)


def state_from_env(environ: Mapping[str, str]) -> tuple[GatewayState, str]:
    config = load_config(environ)
    key = upstream_key(environ)
    check, has_scope = hub_token_checker(config.auth_cache_seconds)
    engine = make_engine(config.db_url)
    where = urlparse(environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101"))
    # The name holds are kept under (hub/lease.py): one process at a time can listen here.
    replica = environ.get("DEEPTUTOR_HUB_REPLICA") or f"{socket.gethostname()}:{where.port}"
    state = GatewayState(
        config=config,
        key=key,
        quota=QuotaStore(engine, replica=replica),
        packs=PackStore(engine),
        _mastery=MasteryStore(engine),
        _reports=ReportLimiter(engine),
        check_token=check,
        has_scope=has_scope,
        service_name=environ.get("JUPYTERHUB_SERVICE_NAME", "deeptutor"),
    )
    if config.lti is not None:
        state.lti = lti_state(config, engine, environ)
    if config.xapi is not None:
        from deeptutor_jupyter.hub.xapi import Statements

        password = environ.get(LRS_PASSWORD_ENV, "").strip()
        state.xapi = Statements(config.xapi, engine, SecretStr(password) if password else None)
    api_url, token = environ.get("JUPYTERHUB_API_URL", ""), environ.get("JUPYTERHUB_API_TOKEN", "")
    if api_url and token:
        state.group_members = hub_group_counter(api_url, token, state)
    return state, environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/deeptutor/")


def lti_state(config: GatewayConfig, engine: Any, environ: Mapping[str, str]) -> Any:
    """The LMS side of the service; the tool's key is read now, so a bad one stops the start."""
    from deeptutor_jupyter.hub.lti.config import LTIConfigError
    from deeptutor_jupyter.hub.lti.state import LTIState
    from deeptutor_jupyter.hub.lti.store import LTIStore

    assert config.lti is not None
    try:
        config.lti.kid  # noqa: B018 - reads and parses the key file
    except LTIConfigError as exc:
        raise ServiceConfigError(str(exc)) from None
    base = environ.get("JUPYTERHUB_BASE_URL", "/")
    return LTIState(config.lti, LTIStore(engine), hub_base=base.rstrip("/") + "/")


async def serve(environ: Mapping[str, str]) -> None:
    state, prefix = state_from_env(environ)
    where = urlparse(environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101"))
    app = make_app(state, prefix)
    server = app.listen(where.port or 80, address=where.hostname or "127.0.0.1", xheaders=True)
    if environ.get(SOCKET_ENV, "").strip():
        # Students' kernels come here, never to the port (hub/kernel_socket.py).
        server.add_socket(bind_kernel_socket(environ[SOCKET_ENV].strip()))
    # Listening, this process is the only one of its name: an earlier one's holds go back now,
    # before the loop serves a request (so none of this process's holds predates its beat).
    lease = state.config.hold_lease_seconds
    keep(state.quota, lease)
    log.info("deeptutor course service on %s%s", where.geturl(), prefix)
    if state.lti is not None:
        state.lti.outbox(state.session()).start()  # scores queued before a restart go out now
    if state.xapi is not None:
        state.xapi.start(state.session())
    while True:
        await asyncio.sleep(lease / 3)
        try:
            await state.db(keep, state.quota, lease)
        except Exception as exc:  # a database hiccup must not stop the service
            log.warning("could not renew the hold lease: %s", type(exc).__name__)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="[deeptutor-hub %(levelname)s] %(message)s")
    try:
        asyncio.run(serve(os.environ))
    except ServiceConfigError as exc:
        print(f"deeptutor course service: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0
