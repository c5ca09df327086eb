"""What the course service needs to know, read from its environment.

``configure()`` (deeptutor_jupyter/hub/configure.py) writes these variables into the service's
own environment in ``jupyterhub_config.py``; a Helm chart or a hand-written service entry can set
them directly (docs/hub.md). The upstream key is kept apart from everything else: it is read from
``DEEPTUTOR_HUB_UPSTREAM_KEY`` or from the file named by ``DEEPTUTOR_HUB_UPSTREAM_KEY_FILE`` and is
held as a ``SecretStr``, so it never appears in a repr, a log line or an error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.hub.lti.config import LTIConfig

CONFIG_ENV = "DEEPTUTOR_HUB_CONFIG"
KEY_ENV = "DEEPTUTOR_HUB_UPSTREAM_KEY"
KEY_FILE_ENV = "DEEPTUTOR_HUB_UPSTREAM_KEY_FILE"
LRS_PASSWORD_ENV = "DEEPTUTOR_HUB_LRS_PASSWORD"


class Limits(BaseModel):
    """A budget: tokens per UTC day and requests per minute; None means no limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    daily_tokens: int | None = Field(None, ge=0)
    requests_per_minute: int | None = Field(None, ge=0)


class XAPIConfig(BaseModel):
    """Where the learning record store is (hub/xapi.py); its password comes from
    ``DEEPTUTOR_HUB_LRS_PASSWORD`` only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str = Field(pattern=r"^https?://")  # the LRS's xAPI base, e.g. .../xAPI/
    username: str = Field(min_length=1, max_length=255)
    # The hub's public URL: students are accounts of it, activities are named under it.
    homepage: str = Field(pattern=r"^https?://")
    free_text: bool = False
    batch: int = Field(50, ge=1, le=500)


class GatewayConfig(BaseModel):
    """Everything but the key. ``groups`` maps a hub group to limits that replace the default."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    upstream_url: str
    models: tuple[str, ...] = ()
    limits: Limits = Limits(daily_tokens=50_000, requests_per_minute=20)
    groups: dict[str, Limits] = Field(default_factory=dict)
    instructors: frozenset[str] = frozenset()
    instructor_groups: frozenset[str] = frozenset()
    db_url: str = "sqlite:///deeptutor-hub.sqlite"
    # The answer length a request gets when it does not ask for one (it is sent upstream as
    # the request's token limit): held back from the day's budget while the request runs, with
    # the prompt, and replaced by the upstream's count when it ends (quota.py).
    reserve_tokens: int = Field(4096, ge=1, le=1_000_000)
    # The name the upstream takes that limit under (OpenAI's reasoning models want
    # max_completion_tokens); a request that names its own keeps its name.
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    # How long the hub's answer about a token is reused: a revoked token works at most this
    # long. Ten seconds cost each active student one hub request per ten seconds at most.
    auth_cache_seconds: int = Field(10, ge=0, le=300)
    upstream_timeout: float = Field(300.0, gt=0)
    # A replica that has not beaten for this long is dead: its requests' holds are given back
    # (hub/lease.py).
    hold_lease_seconds: int = Field(60, ge=3)
    # Aggregates of fewer students than this are hidden on the instructor page.
    min_group_size: int = Field(5, ge=1)
    # An LMS (LTI 1.3, docs/lms.md); None: the course runs without one.
    lti: LTIConfig | None = None
    # A learning record store for xAPI statements (hub/xapi.py); None: no records are made.
    xapi: XAPIConfig | None = None

    @field_validator("upstream_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parsed = urlparse(value.strip())
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError("upstream_url must be an http(s) URL such as https://host/v1")
        return value.strip().rstrip("/")

    def limits_for(self, groups: list[str] | tuple[str, ...]) -> Limits:
        """The most generous group limits among the student's groups, else the default."""
        chosen = [self.groups[g] for g in groups if g in self.groups]
        if not chosen:
            return self.limits
        return Limits(
            daily_tokens=_most(x.daily_tokens for x in chosen),
            requests_per_minute=_most(x.requests_per_minute for x in chosen),
        )

    def is_instructor(self, name: str, groups: list[str] | tuple[str, ...]) -> bool:
        return name in self.instructors or bool(self.instructor_groups.intersection(groups))


def _most(values: Iterable[int | None]) -> int | None:
    numbers: list[int] = []
    for value in values:
        if value is None:
            return None  # one unlimited group wins
        numbers.append(value)
    return max(numbers)


class ServiceConfigError(DeepTutorError, ValueError):
    """The service cannot start; the message says which variable to fix, never the key."""

    code = "service_config"


def upstream_key(environ: Mapping[str, str]) -> SecretStr | None:
    """The key from its variable or its file; a missing file is an error, not an empty key."""
    direct = environ.get(KEY_ENV, "").strip()
    if direct:
        return SecretStr(direct)
    path = environ.get(KEY_FILE_ENV, "").strip()
    if not path:
        return None  # an upstream without a key (a local vLLM) is allowed
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ServiceConfigError(
            f"{KEY_FILE_ENV}={path} could not be read: {exc.strerror}"
        ) from None
    if not text:
        raise ServiceConfigError(f"{KEY_FILE_ENV}={path} is empty")
    return SecretStr(text)


def load_config(environ: Mapping[str, str] | None = None) -> GatewayConfig:
    env = os.environ if environ is None else environ
    raw = env.get(CONFIG_ENV, "").strip()
    if not raw:
        raise ServiceConfigError(f"{CONFIG_ENV} is not set; see docs/hub.md")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ServiceConfigError(f"{CONFIG_ENV} is not valid JSON: {exc}") from None
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as exc:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ServiceConfigError(f"{CONFIG_ENV}: {reasons}") from None
