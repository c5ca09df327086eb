"""LTI and learning-record settings without a hub: configure(), the service's start checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from traitlets.config import Config

from deeptutor_jupyter.hub import configure
from deeptutor_jupyter.hub.app import state_from_env
from deeptutor_jupyter.hub.lti.config import is_instructor
from deeptutor_jupyter.hub.settings import ServiceConfigError

LTI = {
    "issuer": "https://canvas.instructure.com",
    "client_id": "10000000000123",
    "deployment_ids": ["1:abc"],
    "jwks_url": "https://sso.canvaslms.com/api/lti/security/jwks",
    "auth_url": "https://sso.canvaslms.com/api/lti/authorize_redirect",
    "token_url": "https://sso.canvaslms.com/login/oauth2/token",
    "key_file": "/etc/jupyterhub/lti-tool.pem",
}


def test_configure_turns_on_the_lti_login_and_the_lrs_password_stays_in_the_service() -> None:
    c = Config()
    xapi = {"endpoint": "https://lrs/xAPI/", "username": "tutor", "homepage": "https://hub"}
    service = configure(
        c,
        upstream_url="https://api.deepseek.com/v1",
        models=["deepseek-chat"],
        lti=LTI,
        xapi=xapi,
        environ={"DEEPTUTOR_LRS_PASSWORD": "lrs-pass-123"},
    )
    assert c.JupyterHub.authenticator_class.endswith("CourseLTIAuthenticator")
    assert c.CourseLTIAuthenticator.client_id == {LTI["client_id"]}
    assert c.CourseLTIAuthenticator.jwks_endpoint == LTI["jwks_url"]
    settings = json.loads(service["environment"]["DEEPTUTOR_HUB_CONFIG"])
    assert settings["instructor_groups"] == ["lti-instructors"]
    assert settings["lti"]["key_file"] == LTI["key_file"]
    assert service["environment"]["DEEPTUTOR_HUB_LRS_PASSWORD"] == "lrs-pass-123"
    assert "lrs-pass-123" not in json.dumps(settings)
    spawner = {k: v for k, v in c.Spawner.environment.items() if isinstance(v, str)}
    assert "lrs-pass-123" not in json.dumps(spawner)


def test_a_service_with_an_unreadable_tool_key_does_not_start(tmp_path: Path) -> None:
    bad = tmp_path / "tool.pem"
    bad.write_text("not a key")
    settings = {"upstream_url": "http://x/v1", "db_url": f"sqlite:///{tmp_path}/h.sqlite"}
    env = {"DEEPTUTOR_HUB_CONFIG": json.dumps({**settings, "lti": {**LTI, "key_file": str(bad)}})}
    with pytest.raises(ServiceConfigError, match="not a PEM private key"):
        state_from_env(env)
    env = {"DEEPTUTOR_HUB_CONFIG": json.dumps({**settings, "lti": {**LTI, "deployment_ids": []}})}
    with pytest.raises(ServiceConfigError, match="deployment_ids"):
        state_from_env(env)


def test_only_context_roles_make_instructors() -> None:
    lis = "http://purl.imsglobal.org/vocab/lis/v2/"
    assert is_instructor([lis + "membership#Instructor"])
    assert is_instructor([lis + "membership/Instructor#TeachingAssistant"])
    assert not is_instructor([lis + "membership#Learner"])
    # An institution's administrator is not the course's instructor.
    assert not is_instructor([lis + "institution/person#Administrator"])
    assert not is_instructor("Instructor")
