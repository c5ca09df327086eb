"""Learning records into a real LRS: Ralph (ralph-malph 5.x, file backend) from ``.venv-lrs``
(scripts/setup.sh makes it), and the course service in process with a token table.

A question to the tutor, a course notebook's quiz and a mastery report become ``asked``,
``answered``, ``completed`` and ``progressed`` statements the LRS stores and serves back. The
question's text stays out unless the course enables free text. An LRS that is down loses
nothing: the statements wait in the service's database and go when it is back.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from pydantic import SecretStr

from deeptutor_jupyter.hub.quota import make_engine
from deeptutor_jupyter.hub.settings import XAPIConfig
from deeptutor_jupyter.hub.xapi import Statements
from deeptutor_jupyter.runtime.course import send_review
from deeptutor_jupyter.runtime.course_files import build_archive
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from deeptutor_jupyter.testing.ports import free_port
from tests.hub.harness import ROOT
from tests.hub.inproc import start_service, stop_service
from tests.hub.test_course_hub import make_pack

RALPH = ROOT / ".venv-lrs" / "bin"
PASSWORD = "lrs-Secret-7f3a9c"
SECRET_WORDS = "my diary says I failed"
USERS = ("tutor-a", "tutor-b", "tutor-c")
AUTH_FILE = """
import bcrypt, json, sys
path, password, *users = sys.argv[1:]
hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()
home = "https://hub.example.edu"
entries = [
    {"agent": {"objectType": "Agent", "account": {"homePage": home, "name": user}},
     "scopes": ["all"], "hash": hashed, "username": user, "target": user}
    for user in users
]
open(path, "w").write(json.dumps(entries))
"""


@dataclass
class LRS:
    url: str

    def statements(self, user: str) -> list[dict[str, Any]]:
        r = httpx.get(
            f"{self.url}/xAPI/statements",
            params={"limit": 500},
            auth=(user, PASSWORD),
            headers={"X-Experience-API-Version": "1.0.3"},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        return list(r.json()["statements"])


@pytest.fixture(scope="module")
def lrs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LRS]:
    if not (RALPH / "ralph").exists():
        pytest.skip("Ralph is not installed in .venv-lrs (scripts/setup.sh installs it)")
    tmp = tmp_path_factory.mktemp("lrs")
    env = {
        **os.environ,
        "RALPH_APP_DIR": str(tmp),
        "RALPH_AUTH_FILE": str(tmp / "auth.json"),
        "RALPH_RUNSERVER_BACKEND": "fs",
        "RALPH_BACKENDS__LRS__FS__DEFAULT_DIRECTORY_PATH": str(tmp / "data"),
    }
    # Ralph 5.1's file backend writes a user's statements once (a second POST finds the file
    # and refuses: "overwrite is not allowed"), so each test has its own user and folder and
    # sends its statements in one batch. Production LRS backends (ES, MongoDB) take many.
    for user in USERS:
        (tmp / "data" / user).mkdir(parents=True)
    # Ralph's credentials file, as `ralph auth -u USER -s all -t USER -A USER ...` writes it
    # (bcrypt from Ralph's own venv; one process instead of one CLI start per user).
    made = subprocess.run(
        [str(RALPH / "python"), "-c", AUTH_FILE, str(tmp / "auth.json"), PASSWORD, *USERS],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    port = free_port()
    log = (tmp / "ralph.log").open("wb")
    proc = subprocess.Popen(
        [str(RALPH / "python"), "-m", "uvicorn", "ralph.api:app", "--host", "127.0.0.1",
         "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp / "ralph.log").read_text()
            try:
                if httpx.get(f"{url}/__heartbeat__", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp / "ralph.log").read_text()
            time.sleep(0.1)
        yield LRS(url)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def xapi_config(endpoint: str, user: str, *, free_text: bool = False) -> XAPIConfig:
    return XAPIConfig(
        endpoint=endpoint,
        username=user,
        homepage="https://hub.example.edu",
        free_text=free_text,
    )


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def ask_and_quiz(url: str, http: aiohttp.ClientSession, student: str) -> None:
    auth = {"Authorization": f"Bearer student-{student}"}
    tools = [{"type": "function", "function": {"name": "ask_user", "parameters": {}}}]
    question = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": SECRET_WORDS}],
        "tools": tools,
    }
    async with http.post(url + "v1/chat/completions", json=question, headers=auth) as r:
        assert r.status == 200, await r.text()
    # The kernel's background requests (memory consolidation) offer no tools: not a question.
    background = {"model": "fake-model", "messages": [{"role": "user", "content": "Merge."}]}
    async with http.post(url + "v1/chat/completions", json=background, headers=auth) as r:
        assert r.status == 200, await r.text()
    score = {"notebook": "calc/kb/week1.ipynb", "score": 3, "maximum": 4}
    async with http.post(url + "v1/scores", json=score, headers=auth) as r:
        assert r.status == 200, await r.text()


async def test_records_reach_a_real_lrs_without_free_text(
    lrs: LRS, upstream: FakeLLMServer, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    upstream.extend([Reply(text="A derivative is a rate of change."), Reply(text="Merged.")])
    state, server, url = start_service(
        tmp_path / "hub.sqlite",
        upstream=upstream.url,
        xapi=xapi_config(lrs.url + "/xAPI/", "tutor-a"),
        lrs_password=PASSWORD,
    )
    records: Statements = state.xapi  # type: ignore[assignment]
    assert state.packs is not None
    archive = build_archive(make_pack(tmp_path / "calc"))
    state.packs.publish("calc", None, archive, "ms-lee")
    objective = sorted(state.packs.objectives())[0]
    try:
        await ask_and_quiz(url, http, "ada")
        await state.db(records.progressed, "ada", {objective: (0.9, 4)})
        # A review, as the kernel reports it (runtime/course.py), of a course objective only.
        env = {"DEEPTUTOR_HUB_SERVICE_URL": url + "v1", "DEEPTUTOR_HUB_TOKEN": "student-ada"}
        sent = send_review(objective, 1, 1, environ=env)
        assert sent is not None
        await asyncio.to_thread(sent.join, 20)
        own = {"kind": "review", "objective": "my-secret-hobby", "score": 1, "maximum": 1}
        async with http.post(
            url + "v1/scores", json=own, headers={"Authorization": "Bearer student-ada"}
        ) as r:
            assert r.status == 400 and "course's objectives" in await r.text()
        # The question's record is written off the request's path; wait for it, bounded.
        deadline = time.monotonic() + 10
        while records.waiting() < 5:
            assert time.monotonic() < deadline
            await state.db(time.sleep, 0.02)
        assert await records.send_due(http) == 5
    finally:
        await stop_service(state, server)
    mine = [s for s in lrs.statements("tutor-a") if s["actor"]["account"]["name"] == "ada"]
    verbs = sorted(s["verb"]["display"]["en-US"] for s in mine)
    assert verbs == ["answered", "answered", "asked", "completed", "progressed"]
    review = next(s for s in mine if "/tutor/review/" in s["object"]["id"])
    assert review["object"]["id"].endswith(f"/tutor/review/{objective}")
    answered = next(
        s
        for s in mine
        if "/tutor/notebook/" in s["object"]["id"] and s["verb"]["display"]["en-US"] == "answered"
    )
    assert answered["object"]["id"] == "https://hub.example.edu/tutor/notebook/calc/kb/week1.ipynb"
    assert answered["result"]["score"] == {"raw": 3.0, "min": 0, "max": 4.0, "scaled": 0.75}
    assert SECRET_WORDS not in json.dumps(mine)  # no free text unless the course enables it
    assert records.waiting() == 0


async def test_a_question_under_a_hints_policy_asks_for_a_hint(
    upstream: FakeLLMServer, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    upstream.extend([Reply(text="Hint 1."), Reply(text="Merged.")])
    # No LRS needed: what is recorded is in the service's database until it is sent.
    config = xapi_config(f"http://127.0.0.1:{free_port()}/xAPI/", "tutor-x")
    state, server, url = start_service(tmp_path / "hub.sqlite", upstream=upstream.url, xapi=config)
    assert state.packs is not None
    folder = make_pack(tmp_path / "calc")
    tutor_md = (folder / "TUTOR.md").read_text()
    (folder / "TUTOR.md").write_text("---\npolicy: {mode: hints}\n---\n" + tutor_md)
    state.packs.publish("calc", None, build_archive(folder), "ms-lee")
    records: Statements = state.xapi  # type: ignore[assignment]
    try:
        await ask_and_quiz(url, http, "dee")
        deadline = time.monotonic() + 10
        while records.waiting() < 3:
            assert time.monotonic() < deadline
            await state.db(time.sleep, 0.02)
        objects = [
            json.loads(body)["object"]["id"] for _, body, _ in records.due(dt.datetime.now(dt.UTC))
        ]
    finally:
        await stop_service(state, server)
    assert "https://hub.example.edu/tutor/hint" in objects
    assert "https://hub.example.edu/tutor/chat" not in objects


async def test_free_text_when_the_course_enables_it(
    lrs: LRS, upstream: FakeLLMServer, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    upstream.extend([Reply(text="Yes."), Reply(text="Merged.")])
    state, server, url = start_service(
        tmp_path / "hub.sqlite",
        upstream=upstream.url,
        xapi=xapi_config(lrs.url + "/xAPI/", "tutor-b", free_text=True),
        lrs_password=PASSWORD,
    )
    records: Statements = state.xapi  # type: ignore[assignment]
    try:
        await ask_and_quiz(url, http, "bea")
        deadline = time.monotonic() + 10
        while records.waiting() < 3:
            assert time.monotonic() < deadline
            await state.db(time.sleep, 0.02)
        assert await records.send_due(http) == 3
    finally:
        await stop_service(state, server)
    asked = [
        s
        for s in lrs.statements("tutor-b")
        if s["actor"]["account"]["name"] == "bea" and s["verb"]["display"]["en-US"] == "asked"
    ]
    assert [s["result"]["response"] for s in asked] == [SECRET_WORDS]


async def test_an_lrs_that_is_down_loses_nothing(
    lrs: LRS, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/hub.sqlite")
    down = Statements(xapi_config(f"http://127.0.0.1:{free_port()}/xAPI/", "tutor-c"), engine, None)
    down.quiz("cy", "calc/kb/week2.ipynb", 1, 2)
    assert await down.send_due(http) == 0
    assert down.waiting() == 2
    assert "could not be reached" in down.status()[1]
    # Wrong password: refused by the LRS, kept, and the password is nowhere in the error.
    wrong = Statements(
        xapi_config(lrs.url + "/xAPI/", "tutor-c"), engine, SecretStr("not-" + PASSWORD)
    )
    later = wrong.clock().timestamp() + 3600
    assert await wrong.send_due(http, dt.datetime.fromtimestamp(later, dt.UTC)) == 0
    waiting, error = wrong.status()
    assert waiting == 2 and error.startswith("HTTP 40") and PASSWORD not in error
    # The service restarts with the right settings: what waited is sent.
    back = Statements(xapi_config(lrs.url + "/xAPI/", "tutor-c"), engine, SecretStr(PASSWORD))
    assert await back.send_due(http, dt.datetime.fromtimestamp(later + 7200, dt.UTC)) == 2
    assert back.waiting() == 0
    stored = [s for s in lrs.statements("tutor-c") if s["actor"]["account"]["name"] == "cy"]
    assert len(stored) == 2
