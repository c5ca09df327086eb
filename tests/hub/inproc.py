"""The course service in this test's event loop: its real app on a loopback port, a token
table instead of the hub, and (when asked) an LMS and a learning record store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import SecretStr

from deeptutor_jupyter.hub.app import make_app
from deeptutor_jupyter.hub.auth import Identity
from deeptutor_jupyter.hub.gateway import GatewayState
from deeptutor_jupyter.hub.lti.config import LTIConfig
from deeptutor_jupyter.hub.lti.state import LTIState
from deeptutor_jupyter.hub.lti.store import LTIStore
from deeptutor_jupyter.hub.packs import PackStore
from deeptutor_jupyter.hub.quota import QuotaStore, make_engine
from deeptutor_jupyter.hub.settings import GatewayConfig, XAPIConfig
from deeptutor_jupyter.hub.xapi import Statements
from deeptutor_jupyter.testing.ports import free_port
from tests.hub.harness import UPSTREAM_KEY
from tests.hub.lti_platform import LTIPlatform

PREFIX = "/services/deeptutor/"


def lti_config(lms: LTIPlatform, key: Path) -> LTIConfig:
    return LTIConfig(
        issuer=lms.issuer,
        client_id=lms.client_id,
        deployment_ids=(lms.deployment_id,),
        jwks_url=lms.jwks_url,
        auth_url=lms.auth_url,
        token_url=lms.token_url,
        key_file=str(key),
    )


@dataclass
class Service:
    url: str
    state: GatewayState
    lti: Any  # LTIState, when the service has an LMS
    http: aiohttp.ClientSession

    async def call(self, method: str, path: str, token: str | None = None, **kw: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with self.http.request(
            method, self.url + path, headers=headers, allow_redirects=False, **kw
        ) as r:
            return r.status, await r.text(), dict(r.headers)


async def check(token: str) -> Identity | None:
    return Identity(name=token.removeprefix("student-")) if token.startswith("student-") else None


def start_service(
    db: Path,
    lms: LTIPlatform | None = None,
    key: Path | None = None,
    *,
    upstream: str = "http://127.0.0.1:9/v1",
    xapi: XAPIConfig | None = None,
    lrs_password: str | None = None,
) -> tuple[GatewayState, Any, str]:
    """The course service's app on a loopback port of the running loop, a token table
    (``student-<name>``) in place of the hub."""
    lti = lti_config(lms, key) if lms is not None and key is not None else None
    config = GatewayConfig(
        upstream_url=upstream, db_url=f"sqlite:///{db}", lti=lti, xapi=xapi, models=("fake-model",)
    )
    engine = make_engine(config.db_url)
    state = GatewayState(
        config=config,
        key=SecretStr(UPSTREAM_KEY),
        quota=QuotaStore(engine),
        check_token=check,
        has_scope=lambda _who, _scope: True,
    )
    if config.lti is not None:
        state.lti = LTIState(config.lti, LTIStore(engine))
    state.packs = PackStore(engine)
    if xapi is not None:
        state.xapi = Statements(xapi, engine, SecretStr(lrs_password) if lrs_password else None)
    port = free_port()
    server = make_app(state, PREFIX, oauth=False).listen(port, address="127.0.0.1")
    url = f"http://127.0.0.1:{port}{PREFIX}"
    if lms is not None:
        lms.tool_jwks_url = url + "lti/jwks.json"
    return state, server, url


async def stop_service(state: GatewayState, server: Any) -> None:
    server.stop()
    if state._session is not None:
        await state._session.close()
    state.executor.shutdown()
