"""An LTI 1.3 platform (an LMS, as far as the tool can tell) on 127.0.0.1, for the tests.

It has its own RSA key and serves its JWKS; it signs id_tokens (resource link launches and deep
linking requests) the way Canvas or Moodle do; it runs the OAuth2 client-credentials token
endpoint a tool uses for the services (checking the tool's signed assertion against the tool's
JWKS), and the Assignment and Grade Services (line items, scores) and Names and Role
Provisioning Services (memberships) endpoints. Every service request is recorded; a test can
script failures (``fail_scores``) to see that the tool retries.

Real JWTs (PyJWT + cryptography), real HTTP: the tool cannot tell it from an LMS.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import urllib.request
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
ROLE_LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
ROLE_INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
NRPS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"


def new_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem_of(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def jwk_of(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {**public, "kid": kid, "alg": "RS256", "use": "sig"}


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Member:
    user_id: str
    name: str
    roles: list[str] = field(default_factory=lambda: [ROLE_LEARNER])
    email: str = ""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: LTIPlatform) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)


class LTIPlatform:
    """``with LTIPlatform(client_id="tool-1") as lms:``; its URLs are the ones a tool registers."""

    def __init__(self, *, client_id: str = "deeptutor-tool", deployment_id: str = "dep-1") -> None:
        self.client_id = client_id
        self.deployment_id = deployment_id
        self.key = new_rsa_key()
        self.kid = "platform-" + uuid.uuid4().hex[:8]
        self.requests: list[Recorded] = []
        self.line_items: dict[str, dict[str, Any]] = {}
        self.scores: dict[str, list[dict[str, Any]]] = {}
        self.members: list[Member] = []
        self.members_page = 2
        self.next_link = ""  # the Link header of the roster page being answered
        self.link_base = ""  # where next pages are said to be ("": here)
        # Statuses the next score posts get before the platform accepts them (500, 503, ...).
        self.fail_scores: deque[int] = deque()
        self.tokens: set[str] = set()
        # Where the platform reads the tool's public keys (set by the test once the tool runs).
        self.tool_jwks_url = ""
        self._lock = threading.RLock()
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # --- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> LTIPlatform:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def issuer(self) -> str:
        return self.url

    @property
    def jwks_url(self) -> str:
        return self.url + "/jwks"

    @property
    def auth_url(self) -> str:
        return self.url + "/auth"

    @property
    def token_url(self) -> str:
        return self.url + "/token"

    def context_url(self, context: str) -> str:
        return f"{self.url}/contexts/{context}"

    # --- messages ---------------------------------------------------------------------------

    def sign(self, claims: dict[str, Any], key: rsa.RSAPrivateKey | None = None) -> str:
        return jwt.encode(
            claims, key or self.key, algorithm="RS256", headers={"kid": self.kid, "typ": "JWT"}
        )

    def launch_claims(
        self,
        *,
        sub: str,
        nonce: str,
        roles: list[str] | None = None,
        context: str = "calc-101",
        resource_link: str = "link-1",
        custom: dict[str, str] | None = None,
        lineitem: str | None = None,
        target_link_uri: str = "",
        deep_linking_return: str | None = None,
    ) -> dict[str, Any]:
        """The claims of a launch as an LMS sends them (resource link, or deep linking)."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.client_id,
            "sub": sub,
            "iat": now,
            "exp": now + 300,
            "nonce": nonce,
            "name": sub.title(),
            LTI + "version": "1.3.0",
            LTI + "deployment_id": self.deployment_id,
            LTI + "roles": roles or [ROLE_LEARNER],
            LTI + "context": {"id": context, "label": context.upper(), "title": "Calculus"},
            LTI + "target_link_uri": target_link_uri,
            LTI + "custom": custom or {},
            AGS: {
                "scope": [SCORE_SCOPE, LINEITEM_SCOPE],
                "lineitems": f"{self.context_url(context)}/lineitems",
                **({"lineitem": lineitem} if lineitem else {}),
            },
            NRPS: {
                "context_memberships_url": f"{self.context_url(context)}/memberships",
                "service_versions": ["2.0"],
            },
        }
        if deep_linking_return is None:
            claims[LTI + "message_type"] = "LtiResourceLinkRequest"
            claims[LTI + "resource_link"] = {"id": resource_link, "title": "Week 1"}
        else:
            claims[LTI + "message_type"] = "LtiDeepLinkingRequest"
            claims[DL + "deep_linking_settings"] = {
                "deep_link_return_url": deep_linking_return,
                "accept_types": ["ltiResourceLink"],
                "accept_presentation_document_targets": ["window", "iframe"],
                "data": "platform-opaque-" + secrets.token_hex(4),
            }
        return claims

    def add_line_item(self, context: str, label: str, score_maximum: float = 1.0) -> str:
        item_id = f"{self.context_url(context)}/lineitems/{len(self.line_items) + 1}"
        with self._lock:
            self.line_items[item_id] = {
                "id": item_id,
                "label": label,
                "scoreMaximum": score_maximum,
            }
        return item_id

    def service_requests(self, path_part: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if path_part in r.path]

    # --- what the handler calls ----------------------------------------------------------------

    def _token(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        if form.get("client_assertion_type") != (
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        ):
            return 400, {"error": "invalid_request"}
        try:
            keys = jwt.PyJWKClient(self.tool_jwks_url, cache_keys=False)
            signing = keys.get_signing_key_from_jwt(form.get("client_assertion", ""))
            claims = jwt.decode(
                form.get("client_assertion", ""),
                signing.key,
                algorithms=["RS256"],
                audience=self.token_url,
                issuer=self.client_id,
            )
        except (jwt.PyJWTError, urllib.error.URLError) as exc:
            return 401, {"error": "invalid_client", "error_description": str(exc)}
        if claims.get("sub") != self.client_id or not claims.get("jti"):
            return 401, {"error": "invalid_client"}
        token = secrets.token_hex(16)
        with self._lock:
            self.tokens.add(token)
        scope = form.get("scope", "")
        return 200, {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": 3600,
            "scope": scope,
        }

    def _authorized(self, headers: dict[str, str]) -> bool:
        value = headers.get("authorization", "")
        return value.startswith("Bearer ") and value[7:] in self.tokens

    def _service(
        self, method: str, path: str, body: Any, page: str | None = None
    ) -> tuple[int, Any, str]:
        json_type = "application/json"
        if path.endswith("/scores") and method == "POST":
            item = path[: -len("/scores")]
            if item not in {urlsplit(i).path for i in self.line_items}:
                return 404, {"error": "no such line item"}, json_type
            with self._lock:
                if self.fail_scores:
                    return self.fail_scores.popleft(), {"error": "scripted failure"}, json_type
                self.scores.setdefault(item, []).append(body)
            return 200, {}, json_type
        if path.endswith("/lineitems") and method == "GET":
            return (
                200,
                list(self.line_items.values()),
                "application/vnd.ims.lis.v2.lineitemcontainer+json",
            )
        if path.endswith("/lineitems") and method == "POST":
            context = path.split("/")[2]
            item = self.add_line_item(
                context, str(body.get("label", "")), body.get("scoreMaximum", 1)
            )
            with self._lock:
                self.line_items[item].update(body)
                return 201, self.line_items[item], "application/vnd.ims.lis.v2.lineitem+json"
        if path.endswith("/memberships") and method == "GET":
            # Pages of ``members_page`` members, the next one named by a Link header (as
            # Canvas pages its rosters).
            start = int(page or 0) * self.members_page
            members = [
                {"user_id": m.user_id, "name": m.name, "roles": m.roles, "status": "Active"}
                | ({"email": m.email} if m.email else {})
                for m in self.members[start : start + self.members_page]
            ]
            context = path.split("/")[2]
            if start + self.members_page < len(self.members):
                base = self.link_base or self.url
                self.next_link = f'<{base}{path}?page={int(page or 0) + 1}>; rel="next"'
            return (
                200,
                {"id": self.url + path, "context": {"id": context}, "members": members},
                "application/vnd.ims.lti-nrps.v2.membershipcontainer+json",
            )
        return 404, {"error": "not found"}, json_type


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(
        self, status: int, body: Any, content_type: str = "application/json", link: str = ""
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if link:
            self.send_header("Link", link)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self, body: Any) -> None:
        owner = self.server.owner
        headers = {k.lower(): v for k, v in self.headers.items()}
        with owner._lock:
            owner.requests.append(Recorded(self.command, self.path, headers, body))

    def _read(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self) -> None:
        owner = self.server.owner
        path = urlsplit(self.path).path
        if path == "/jwks":
            self._reply(200, {"keys": [jwk_of(owner.key, owner.kid)]})
            return
        self._record(None)
        if not owner._authorized({k.lower(): v for k, v in self.headers.items()}):
            self._reply(401, {"error": "invalid_token"})
            return
        page = dict(parse_qsl(urlsplit(self.path).query)).get("page")
        with owner._lock:
            owner.next_link = ""
            answer = owner._service("GET", path, None, page)
            link = owner.next_link
        self._reply(*answer, link=link)

    def do_POST(self) -> None:
        owner = self.server.owner
        path = urlsplit(self.path).path
        raw = self._read()
        if path == "/token":
            form = dict(parse_qsl(raw.decode()))
            self._record(form)
            self._reply(*owner._token(form))
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self._record(body)
        if not owner._authorized({k.lower(): v for k, v in self.headers.items()}):
            self._reply(401, {"error": "invalid_token"})
            return
        self._reply(*owner._service("POST", path, body))
