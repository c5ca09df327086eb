"""LTI 1.3 launch into a real JupyterHub, from a platform that signs real JWTs (lti_platform.py).

One hub for the module, logging users in with the course's LTI authenticator. The test plays
the browser and the LMS: the OIDC login initiation, the platform's id_token posted back, and
the hops to the course service. Each refusal must say why in words a student can pass on.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
import jwt
import pytest

from deeptutor_jupyter.hub.lti.page import NEVER_ASKED, NEVER_LAUNCHED
from deeptutor_jupyter.runtime.course_files import build_archive
from deeptutor_jupyter.testing import FakeLLMServer
from tests.e2e.kernel_driver import KernelDriver
from tests.hub.harness import Hub
from tests.hub.lti_platform import (
    DL,
    LTI,
    ROLE_INSTRUCTOR,
    LTIPlatform,
    Member,
    new_rsa_key,
    pem_of,
)
from tests.hub.test_course_hub import quiz_on

pytestmark = pytest.mark.hub
NOTEBOOK = "calc/kb/week1.ipynb"


@pytest.fixture(scope="module")
def lms() -> Iterator[LTIPlatform]:
    with LTIPlatform(client_id="deeptutor-tool", deployment_id="dep-1") as platform:
        yield platform


@pytest.fixture(scope="module")
def hub(
    tmp_path_factory: pytest.TempPathFactory, upstream: FakeLLMServer, lms: LTIPlatform
) -> Iterator[Hub]:
    tmp = tmp_path_factory.mktemp("lti-hub")
    key_file = tmp / "tool-key.pem"
    key_file.write_bytes(pem_of(new_rsa_key()))
    os.chmod(key_file, 0o600)
    lti = {
        "issuer": lms.issuer,
        "client_id": lms.client_id,
        "deployment_ids": [lms.deployment_id],
        "jwks_url": lms.jwks_url,
        "auth_url": lms.auth_url,
        "token_url": lms.token_url,
        "key_file": str(key_file),
        "context_groups": {"calc-101": "class-a"},
    }
    running = Hub(tmp, upstream.url, lti=lti)
    try:
        yield running
    finally:
        running.stop()


class Launch:
    """One browser's trip: login initiation, then the platform's form post of the id_token."""

    def __init__(self, hub: Hub, lms: LTIPlatform) -> None:
        self.hub, self.lms = hub, lms
        with httpx.Client(timeout=30) as client:
            r = client.post(
                f"{hub.url}/hub/lti13/oauth_login",
                data={
                    "iss": lms.issuer,
                    "login_hint": "opaque-hint",
                    "target_link_uri": f"{hub.url}/hub/",
                    "client_id": lms.client_id,
                    "lti_deployment_id": lms.deployment_id,
                },
            )
            self.cookies = dict(client.cookies)
        assert r.status_code == 302, r.text[:500]
        location = r.headers["location"]
        assert location.startswith(lms.auth_url)
        asked = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        self.nonce, self.state = asked["nonce"], asked["state"]
        self.redirect_uri = asked["redirect_uri"]

    def logged_in(self, token: str) -> httpx.Client:
        """A browser that completed the launch, through the service to the notebook link."""
        client = httpx.Client(timeout=30, cookies=self.cookies)
        r = client.post(self.redirect_uri, data={"id_token": token, "state": self.state})
        assert r.status_code == 302, r.text[:500]
        assert client.get(self.hub.url + r.headers["location"]).status_code == 302
        return client

    def post(self, token: str, cookies: dict[str, str] | None = None) -> httpx.Response:
        client = httpx.Client(timeout=30, cookies=cookies if cookies is not None else self.cookies)
        with client:
            return client.post(self.redirect_uri, data={"id_token": token, "state": self.state})


def claims(lms: LTIPlatform, launch: Launch, **kw: Any) -> dict[str, Any]:
    return lms.launch_claims(nonce=launch.nonce, **kw)


@pytest.fixture(scope="module")
def pack(hub: Hub, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The course's pack, with a notebook, for the course group of the LMS context."""
    folder = tmp_path_factory.mktemp("pack") / "calc"
    (folder / "kb").mkdir(parents=True)
    (folder / "TUTOR.md").write_text("# Calculus\n", encoding="utf-8")
    notebook = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (folder / "kb" / "week1.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    token = hub.token_for("ms-lee")
    r = httpx.put(
        f"{hub.service}/v1/packs/calc?group=class-a",
        content=build_archive(folder),
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert r.status_code in (200, 201), r.text


def test_a_launch_logs_in_joins_the_course_and_opens_the_notebook(
    hub: Hub, lms: LTIPlatform
) -> None:
    launch = Launch(hub, lms)
    custom = {"notebook": "calc/kb/week1.ipynb"}
    r = launch.post(lms.sign(claims(lms, launch, sub="stu-ada", custom=custom)))
    assert r.status_code == 302, r.text[:800]
    to_service = r.headers["location"]
    assert to_service.startswith("/services/deeptutor/lti/launch?note=")
    # The note the hub hands the service is signed by the tool's key: one changed byte fails.
    bad = hub.url + to_service[:-3] + ("AAA" if not to_service.endswith("AAA") else "BBB")
    refused = httpx.get(bad, timeout=30)
    assert refused.status_code == 400 and "Launch again" in refused.text
    onward = httpx.get(hub.url + to_service, timeout=30)
    assert onward.status_code == 302, onward.text[:500]
    target = onward.headers["location"]
    assert target.startswith("/hub/user-redirect/deeptutor/course/open?notebook=")
    assert unquote(target.split("notebook=")[1]) == "calc/kb/week1.ipynb"
    user = hub.admin("GET", "/users/stu-ada").json()
    assert "class-a" in user["groups"]  # the LTI context's group (context_groups)
    assert "lti-instructors" not in user["groups"]

    # The same launch posted again (form and cookies captured) is refused: nonce replay.
    again = launch.post(_sent_token(r))
    assert again.status_code == 400
    assert "already used" in again.text


def _sent_token(response: httpx.Response) -> str:
    sent = parse_qs(response.request.content.decode())
    return sent["id_token"][0]


def test_an_instructor_launch_makes_an_instructor_and_a_learner_launch_undoes_it(
    hub: Hub, lms: LTIPlatform
) -> None:
    first = Launch(hub, lms)
    token = lms.sign(claims(lms, first, sub="prof-turing", roles=[ROLE_INSTRUCTOR]))
    assert first.post(token).status_code == 302
    assert "lti-instructors" in hub.admin("GET", "/users/prof-turing").json()["groups"]
    second = Launch(hub, lms)
    assert second.post(lms.sign(claims(lms, second, sub="prof-turing"))).status_code == 302
    assert "lti-instructors" not in hub.admin("GET", "/users/prof-turing").json()["groups"]


@pytest.mark.parametrize(
    ("change", "status", "words"),
    [
        ("signature", 400, "Signature verification failed"),
        ("audience", 401, "Audience"),
        ("expired", 400, "expired"),
        ("deployment", 400, "deployment this hub does not know"),
        ("no-expiry", 400, "exp not in request"),
    ],
)
def test_a_bad_launch_is_refused_with_its_reason(
    hub: Hub, lms: LTIPlatform, change: str, status: int, words: str
) -> None:
    launch = Launch(hub, lms)
    body = claims(lms, launch, sub="stu-mallory")
    key = None
    if change == "signature":
        key = new_rsa_key()  # same kid, another key: what a forger can do
    elif change == "audience":
        body["aud"] = "another-tool"
    elif change == "expired":
        body["iat"], body["exp"] = int(time.time()) - 400, int(time.time()) - 100
    elif change == "no-expiry":
        del body["exp"]  # PyJWT checks exp only when the token has one
    else:
        body[LTI + "deployment_id"] = "dep-unknown"
    r = launch.post(lms.sign(body, key))
    assert r.status_code == status, r.text[:800]
    assert words in r.text
    assert hub.admin("GET", "/users/stu-mallory").status_code == 404  # nobody was logged in


def test_deep_linking_lets_an_instructor_pick_a_notebook(
    hub: Hub, lms: LTIPlatform, pack: None
) -> None:
    launch = Launch(hub, lms)
    return_url = f"{lms.url}/deep-link-return"
    body = claims(
        lms, launch, sub="prof-noether", roles=[ROLE_INSTRUCTOR], deep_linking_return=return_url
    )
    r = launch.post(lms.sign(body))
    assert r.status_code == 302, r.text[:800]
    page = httpx.get(hub.url + r.headers["location"], timeout=30)
    assert page.status_code == 200 and "calc/kb/week1.ipynb" in page.text, page.text[:800]
    note = parse_qs(urlsplit(r.headers["location"]).query)["note"][0]
    picked = httpx.post(
        f"{hub.service}/lti/deep-link",
        data={"note": note, "notebook": "calc/kb/week1.ipynb", "graded": "1"},
        timeout=30,
    )
    assert picked.status_code == 200, picked.text[:800]
    assert f'action="{return_url}"' in picked.text
    response = picked.text.split('name="JWT" value="')[1].split('"')[0]
    # The LMS checks the response with the tool's published key.
    keys = jwt.PyJWKClient(f"{hub.service}/lti/jwks.json")
    signing = keys.get_signing_key_from_jwt(response)
    got = jwt.decode(response, signing.key, algorithms=["RS256"], audience=lms.issuer)
    assert got["iss"] == lms.client_id
    assert got[LTI + "message_type"] == "LtiDeepLinkingResponse"
    assert got[DL + "data"] == body[DL + "deep_linking_settings"]["data"]
    (item,) = got[DL + "content_items"]
    assert item["custom"] == {"notebook": "calc/kb/week1.ipynb"}
    assert item["lineItem"]["scoreMaximum"] == 1
    # A student cannot get the picker with their own launch.
    student = Launch(hub, lms)
    body = claims(lms, student, sub="stu-ada", deep_linking_return=return_url)
    r = student.post(lms.sign(body))
    assert httpx.get(hub.url + r.headers["location"], timeout=30).status_code == 403
    # The tool's JWKS is public data: no private part in it.
    assert '"d"' not in httpx.get(f"{hub.service}/lti/jwks.json", timeout=30).text


def test_the_instructor_page_shows_the_lms_roster(hub: Hub, lms: LTIPlatform) -> None:
    lms.tool_jwks_url = f"{hub.service}/lti/jwks.json"  # the platform checks our assertions
    lms.members = [
        Member("stu-ada", "Ada Lovelace"),
        Member("stu-zed", "Zed Never"),
        Member("prof-hopper", "Grace Hopper", [ROLE_INSTRUCTOR]),
    ]
    student = Launch(hub, lms)
    student.logged_in(lms.sign(claims(lms, student, sub="stu-ada"))).close()
    launch = Launch(hub, lms)
    token = lms.sign(claims(lms, launch, sub="prof-hopper", roles=[ROLE_INSTRUCTOR]))
    browser = launch.logged_in(token)
    try:
        page = browser.get(f"{hub.service}/instructor/", follow_redirects=True)
    finally:
        browser.close()
    assert page.status_code == 200, page.text[:800]
    rows = {row.split("</td>")[0]: row for row in page.text.split("<tr><td>")[1:]}
    assert NEVER_LAUNCHED in rows["Zed Never"]
    assert "stu-ada" in rows["Ada Lovelace"] and NEVER_ASKED in rows["Ada Lovelace"]
    assert "Instructor" in rows["Grace Hopper"]
    fetched = lms.service_requests("/memberships")[-1]
    token = fetched.headers["authorization"].removeprefix("Bearer ")
    assert token in lms.tokens
    # The LMS's token and the tool's key are in no page and no log (the service logs there).
    assert token not in page.text and token not in hub.log_text(whole=True)
    key = Path(hub.tmp / "tool-key.pem").read_text().splitlines()[1]
    assert key not in page.text and key not in hub.log_text(whole=True)

    # The instructor sends an objective's mastery to a new gradebook column, then removes it.
    teacher = {"Authorization": f"Bearer {hub.token_for('prof-hopper')}"}
    form = {"action": "map_lineitem", "context": "calc-101", "source": "limits",
            "kind": "mastery", "label": "Limits (mastery)"}  # fmt: skip
    r = httpx.post(f"{hub.service}/instructor/", data=form, headers=teacher, timeout=30)
    assert r.status_code == 302, r.text[:500]
    (made,) = [i for i in lms.line_items.values() if i["label"] == "Limits (mastery)"]
    page = httpx.get(f"{hub.service}/instructor/", headers=teacher, timeout=30).text
    assert made["id"] in page
    elsewhere = {**form, "label": "", "lineitem": "https://lms.example.org/lineitems/1"}
    r = httpx.post(f"{hub.service}/instructor/", data=elsewhere, headers=teacher, timeout=30)
    assert r.status_code == 400 and "one of this course" in r.text
    gone = {"action": "unmap_lineitem", "context": "calc-101", "source": "limits"}
    r = httpx.post(f"{hub.service}/instructor/", data=gone, headers=teacher, timeout=30)
    assert r.status_code == 302
    assert made["id"] not in httpx.get(f"{hub.service}/instructor/", headers=teacher).text


@pytest.mark.e2e  # a real kernel
def test_a_graded_quiz_in_the_launched_notebook_reaches_the_gradebook(
    hub: Hub, lms: LTIPlatform, pack: None, upstream: FakeLLMServer, tmp_path: Path
) -> None:
    """Launch, the student's own kernel, a graded quiz, the score in the LMS: end to end."""
    lms.tool_jwks_url = f"{hub.service}/lti/jwks.json"
    item = lms.add_line_item("calc-101", "Week 1 (graded)")
    launch = Launch(hub, lms)
    body = claims(lms, launch, sub="stu-kim", custom={"notebook": NOTEBOOK}, lineitem=item)
    launch.logged_in(lms.sign(body)).close()
    scopes = ["access:services!service=deeptutor", "read:users:groups!user"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "DEEPTUTOR"))}
    env.update(
        # What configure() gives a student's server (the kernel token as KernelToken mints it).
        DEEPTUTOR_HUB_SERVICE_URL=f"{hub.service}/v1",
        DEEPTUTOR_HUB_SERVICE_NAME="deeptutor",
        DEEPTUTOR_HUB_MODEL="fake-model",
        DEEPTUTOR_HUB_TOKEN=hub.token_for("stu-kim", scopes),
        DEEPTUTOR_HOME=str(tmp_path / "home"),
        DEEPTUTOR_AUTO_CONSOLIDATE="false",
        JPY_SESSION_NAME=str(tmp_path / "course" / NOTEBOOK),  # the launch's copy
        IPYTHONDIR=str(tmp_path / "ipython"),
    )
    k = KernelDriver(env, cwd=tmp_path)
    try:
        k.execute("%load_ext deeptutor_jupyter")
        quiz_on(k, upstream, "limits")
    finally:
        k.shutdown()
    path = item.removeprefix(lms.url)
    deadline = time.monotonic() + 30
    while not lms.scores.get(path):
        assert time.monotonic() < deadline, hub.log_text()
        time.sleep(0.1)
    (score,) = lms.scores[path]
    assert score["userId"] == "stu-kim"
    assert (score["scoreGiven"], score["scoreMaximum"]) == (1.0, 1.0)
    assert score["activityProgress"] == "Completed"
