"""The LMS's services, as the tool: OAuth2 client-credentials tokens, AGS scores and line items,
NRPS memberships (LTI Advantage), over the service's aiohttp session.

Why not pylti1p3: its service classes are synchronous (``requests``) and built around a launch
object of a web framework; the service runs on tornado's loop and already has aiohttp. What the
services need is small: a client assertion signed with the tool's key (PyJWT), a token cache,
and three JSON calls; they are here, each a few lines.

Tokens are kept in memory only, never logged; an error keeps the LMS's status and at most a
short, token-free part of its answer.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.hub.lti.config import LTIConfig

SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
MEMBERSHIPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
MEMBERSHIP_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
TIMEOUT = aiohttp.ClientTimeout(total=20)
MAX_BYTES = 16 << 20  # the largest answer read (a roster of thousands is a few MiB)
# A roster larger than any class; the rest is not read.
MAX_MEMBERS = 5000
MAX_PAGES = 100


class LMSError(DeepTutorError):
    """The LMS refused or could not be reached; ``message`` is safe to show an instructor."""

    code = "lms_error"


@dataclass
class LMSClient:
    config: LTIConfig
    session: aiohttp.ClientSession
    _tokens: dict[str, tuple[str, float]] = field(default_factory=dict)

    async def token(self, scope: str) -> str:
        cached = self._tokens.get(scope)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        now = int(time.time())
        assertion = self.config.sign(
            {
                "iss": self.config.client_id,
                "sub": self.config.client_id,
                "aud": self.config.token_url,
                "iat": now,
                "exp": now + 300,
                "jti": uuid.uuid4().hex,
            }
        )
        form = {
            "grant_type": "client_credentials",
            "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            "client_assertion": assertion,
            "scope": scope,
        }
        data = await self._call("POST", self.config.token_url, data=form)
        token = data.get("access_token") if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise LMSError("The LMS's token endpoint gave no access token.")
        expires = data.get("expires_in", 3600)
        life = float(expires) if isinstance(expires, int | float) else 3600.0
        self._tokens[scope] = (token, time.monotonic() + max(0.0, life - 60))
        return token

    async def post_score(self, lineitem: str, score: dict[str, Any]) -> None:
        token = await self.token(SCORE)
        url = _under(lineitem, "scores")
        headers = {"Authorization": f"Bearer {token}", "Content-Type": SCORE_TYPE}
        await self._call("POST", url, json=score, headers=headers)

    async def create_lineitem(self, lineitems: str, label: str, maximum: float) -> str:
        token = await self.token(LINEITEM)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": LINEITEM_TYPE}
        body = {"label": label, "scoreMaximum": maximum}
        data = await self._call("POST", lineitems, json=body, headers=headers)
        item = data.get("id") if isinstance(data, dict) else None
        if not isinstance(item, str) or not item:
            raise LMSError("The LMS did not say which line item it created.")
        return item

    async def members(self, memberships: str) -> list[dict[str, Any]]:
        """Every page of the roster (NRPS pages with ``Link: <...>; rel="next"``, as Canvas
        does by ten); a next page elsewhere than the roster's own origin is not followed, so
        the token goes nowhere else."""
        token = await self.token(MEMBERSHIPS)
        headers = {"Authorization": f"Bearer {token}", "Accept": MEMBERSHIP_TYPE}
        out: list[dict[str, Any]] = []
        url: str | None = memberships
        for _ in range(MAX_PAGES):
            if url is None or len(out) >= MAX_MEMBERS:
                break
            data, links = await self._call_with_links("GET", url, headers=headers)
            found = data.get("members") if isinstance(data, dict) else None
            if not isinstance(found, list):
                raise LMSError("The LMS's roster has no members list.")
            out += [m for m in found if isinstance(m, dict)]
            following = links.get("next")
            url = following if following and _origin(following) == _origin(memberships) else None
        return out[:MAX_MEMBERS]

    async def _call(self, method: str, url: str, **kw: Any) -> Any:
        return (await self._call_with_links(method, url, **kw))[0]

    async def _call_with_links(
        self, method: str, url: str, **kw: Any
    ) -> tuple[Any, dict[str, str]]:
        try:
            async with self.session.request(method, url, timeout=TIMEOUT, **kw) as response:
                if response.status == 401:
                    self._tokens.clear()  # an expired token: the next try asks for a new one
                if response.status >= 300:
                    raise LMSError(f"HTTP {response.status} from the LMS ({_host(url)})")
                raw = await response.content.read(MAX_BYTES + 1)
                links = {
                    str(rel): str(link.get("url", ""))
                    for rel, link in response.links.items()
                    if link.get("url")
                }
            if len(raw) > MAX_BYTES:
                raise LMSError(
                    f"the LMS's answer is larger than {MAX_BYTES >> 20} MiB ({_host(url)})"
                )
            return (json.loads(raw) if raw.strip() else {}), links
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise LMSError(
                f"the LMS could not be reached ({_host(url)}: {type(exc).__name__})"
            ) from None
        except ValueError:
            raise LMSError(f"the LMS answered something that is not JSON ({_host(url)})") from None


def _under(lineitem: str, leaf: str) -> str:
    """``<lineitem>/scores``, keeping the line item's query string after the path (AGS §3.4)."""
    path, _, query = lineitem.partition("?")
    return f"{path.rstrip('/')}/{leaf}" + (f"?{query}" if query else "")


def _origin(url: str) -> tuple[str, str]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.scheme, parts.netloc


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc[:100]
