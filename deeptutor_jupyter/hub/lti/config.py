"""The LMS registration (one platform per course service) and the tool's own RSA key.

The hub's authenticator and the course service both read it: the hub validates launches with
the platform's JWKS, the service signs with the tool's key (deep-linking responses, the client
assertion of the services' token requests) and publishes its public half at
``{prefix}lti/jwks.json``. The private key is read from a file (mode 0600) and never appears in
a repr, a log line or a page.
"""

from __future__ import annotations

import hashlib
import time
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from deeptutor_jupyter.errors import DeepTutorError

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
# Context roles (LIS v2 membership vocabulary) that may run the course on the tutor's side.
INSTRUCTOR_ROLES = (
    "/membership#Instructor",
    "/membership#ContentDeveloper",
    "/membership/Instructor#TeachingAssistant",
)
# How long the note a launch hands to the service stays good: the browser follows it at once.
NOTE_SECONDS = 120
NOTE_AUDIENCE = "deeptutor-course-service"


class LTIConfigError(DeepTutorError, ValueError):
    """The LTI settings cannot be used; the message names the setting, never the key."""

    code = "lti_config"


class LTIConfig(BaseModel):
    """What the LMS gave when the tool was registered, and where the tool's key is."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    issuer: str = Field(min_length=1, max_length=500)
    client_id: str = Field(min_length=1, max_length=255)
    deployment_ids: tuple[str, ...] = Field(min_length=1)
    jwks_url: str
    auth_url: str
    token_url: str
    key_file: str
    # LTI context id -> hub group; a context not listed becomes the group "lti-<context id>".
    context_groups: dict[str, str] = Field(default_factory=dict)
    # The hub group LTI instructors are put in (configure() makes it an instructor group).
    instructors_group: str = "lti-instructors"

    @field_validator("jwks_url", "auth_url", "token_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL")
        return value

    def group_for(self, context_id: str) -> str:
        mapped = self.context_groups.get(context_id)
        if mapped:
            return mapped
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in context_id)
        return f"lti-{safe[:200]}"

    @cached_property
    def key(self) -> Any:
        """The tool's RSA private key, read once from ``key_file``."""
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        path = Path(self.key_file)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise LTIConfigError(f"lti.key_file {path} could not be read: {exc.strerror}") from None
        try:
            return load_pem_private_key(data, password=None)
        except (ValueError, TypeError):
            raise LTIConfigError(f"lti.key_file {path} is not a PEM private key") from None

    @cached_property
    def kid(self) -> str:
        """The tool key's id: a hash of its public half, so a new key gets a new id."""
        from cryptography.hazmat.primitives import serialization

        public = self.key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return "deeptutor-" + hashlib.sha256(public).hexdigest()[:16]

    def jwks(self) -> dict[str, Any]:
        """The tool's public key set, for the LMS (it checks our assertions and responses)."""
        import json

        import jwt

        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def sign(self, claims: dict[str, Any]) -> str:
        import jwt

        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid})

    def note(self, student: str, body: dict[str, Any]) -> str:
        """What a verified launch tells the service, signed by the tool's key for two minutes."""
        now = int(time.time())
        claims = {"aud": NOTE_AUDIENCE, "sub": student, "iat": now, "exp": now + NOTE_SECONDS}
        return self.sign({**claims, "launch": body})

    def read_note(self, token: str) -> tuple[str, dict[str, Any]]:
        """The student and launch of a note; LTIConfigError when it is not ours or too old."""
        import jwt

        try:
            claims = jwt.decode(
                token,
                self.key.public_key(),
                algorithms=["RS256"],
                audience=NOTE_AUDIENCE,
                options={"require": ["exp", "sub", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise LTIConfigError(
                f"This launch link is not valid ({exc}). Launch again from the course."
            ) from None
        launch = claims.get("launch")
        if not isinstance(launch, dict):
            raise LTIConfigError("This launch link carries no launch.")
        return str(claims["sub"]), launch


def is_instructor(roles: Any) -> bool:
    """Whether an LTI role list makes its holder an instructor of the context."""
    if not isinstance(roles, list):
        return False
    return any(isinstance(r, str) and r.endswith(INSTRUCTOR_ROLES) for r in roles)
