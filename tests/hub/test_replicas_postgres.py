"""Two replicas of the course service on one PostgreSQL share each student's budget.

Replica 1 is the hub's managed service (reached through the proxy); replica 2 is a second
process of the same service with the same settings, as a second pod would be on Kubernetes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from deeptutor_jupyter.hub.mastery import REPORTS_PER_MINUTE
from deeptutor_jupyter.hub.usage_stream import estimate_prompt_tokens
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from deeptutor_jupyter.testing.ports import free_port
from tests.hub.harness import UPSTREAM_KEY, Hub
from tests.hub.postgres import Postgres
from tests.hub.test_gateway_hub import SERVICE_SCOPE
from tests.hub.test_quota_hub import publish_objectives

pytestmark = pytest.mark.hub


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    cluster = Postgres()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def pg_hub(
    tmp_path_factory: pytest.TempPathFactory, upstream: FakeLLMServer, postgres: Postgres
) -> Iterator[Hub]:
    running = Hub(
        tmp_path_factory.mktemp("pghub"), upstream.url, daily_tokens=1_000, db_url=postgres.url
    )
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def replica(pg_hub: Hub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second service process: the managed service's settings, its own port."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "DEEPTUTOR"))}
    config_env = _service_config(pg_hub.tmp / "jupyterhub_config.py")
    env.update(
        JUPYTERHUB_API_URL=pg_hub.api,
        JUPYTERHUB_SERVICE_NAME="deeptutor",
        JUPYTERHUB_SERVICE_PREFIX="/services/deeptutor/",
        JUPYTERHUB_SERVICE_URL=f"http://127.0.0.1:{port}",
        DEEPTUTOR_HUB_CONFIG=config_env,
        DEEPTUTOR_HUB_UPSTREAM_KEY=UPSTREAM_KEY,
    )
    log = (tmp_path_factory.mktemp("replica") / "replica.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "deeptutor_jupyter.hub"], env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}/services/deeptutor"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/v1/models").status_code == 401:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "replica did not start"
        time.sleep(0.1)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _service_config(config_file: Path) -> str:
    """The DEEPTUTOR_HUB_CONFIG configure() gave the managed service, read back from the config."""
    from traitlets.config import Config

    from deeptutor_jupyter.hub import configure

    namespace = {"c": Config(), "configure": configure}
    source = config_file.read_text(encoding="utf-8").replace(
        "from deeptutor_jupyter.hub import configure\n", ""
    )
    exec(compile(source, str(config_file), "exec"), namespace)  # the test's own file
    services = namespace["c"].JupyterHub.services
    entry = next(s for s in services if s["name"] == "deeptutor")
    return str(entry["environment"]["DEEPTUTOR_HUB_CONFIG"])


def _ask(url: str, token: str, max_tokens: int = 100) -> httpx.Response:
    body = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "max_tokens": max_tokens,
    }
    return httpx.post(
        f"{url}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


def test_a_budget_spent_on_one_replica_is_spent_on_the_other(
    pg_hub: Hub, replica: str, upstream: FakeLLMServer
) -> None:
    token = pg_hub.token_for("alice", [SERVICE_SCOPE])
    upstream.add(Reply(text="Big.", usage={"prompt_tokens": 800, "completion_tokens": 300}))
    assert _ask(pg_hub.service, token).status_code == 200
    refused = _ask(replica, token)
    assert refused.status_code == 429
    assert "today's tutor budget" in refused.json()["error"]["message"]


def test_concurrent_requests_on_two_replicas_admit_exactly_the_budget(
    pg_hub: Hub, replica: str, upstream: FakeLLMServer
) -> None:
    token = pg_hub.token_for("bob", [SERVICE_SCOPE])
    # Each request holds its prompt (estimated) and its max_tokens (100) while it runs; the
    # upstream answers only after 3 s, so all twenty are decided while the admitted ones
    # hold: a budget of 1000 admits eight whole holds and a ninth granted what is left,
    # however the twenty interleave across the replicas.
    prompt = estimate_prompt_tokens({"messages": [{"role": "user", "content": "hi"}]})
    last = 1000 - 8 * (prompt + 100) - prompt
    upstream.extend(
        Reply(text="ok", delay=3.0, usage={"prompt_tokens": 50, "completion_tokens": 50})
        for _ in range(9)
    )
    urls = [pg_hub.service if i % 2 else replica for i in range(20)]
    with ThreadPoolExecutor(20) as pool:
        statuses = list(pool.map(lambda u: _ask(u, token).status_code, urls))
    assert sorted(statuses) == [200] * 9 + [429] * 11
    granted = sorted(r.body["max_tokens"] for r in upstream.requests[-9:])
    assert granted == [last] + [100] * 8
    used = httpx.get(f"{replica}/v1/usage", headers={"Authorization": f"Bearer {token}"}).json()
    assert used["used_today"] == 900
    assert json.dumps(used).count('"requests": 9') == 1


def _usage(url: str, token: str) -> tuple[int, int]:
    data = httpx.get(f"{url}/v1/usage", headers={"Authorization": f"Bearer {token}"}).json()
    return int(data["used_today"]), int(data["held_now"])


def _lock_waiters(engine: sa.Engine) -> int:
    """Sessions of the database waiting for a lock (the replicas' admissions, below)."""
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND backend_type = 'client backend'"
                )
            ).scalar_one()
        )


def test_replicas_that_read_the_same_budget_at_once_admit_only_what_is_left(
    pg_hub: Hub, replica: str, upstream: FakeLLMServer, postgres: Postgres
) -> None:
    """The race a read-then-write admission loses, made to happen every run: the test holds
    the student's budget row locked while twenty requests reach both replicas, and lets go
    only once each replica's admission waits on it (each replica runs one batch at a time, so
    two waiting sessions are one per replica). Both have read the budget by then. With the
    conditional upsert the second one re-checks against the first one's hold and is refused;
    an admission that decides on what it read admits both, every time."""
    token = pg_hub.token_for("carol", [SERVICE_SCOPE])
    prompt = estimate_prompt_tokens({"messages": [{"role": "user", "content": "hi"}]})
    # First a request whose real cost (from the upstream) differs from its hold: afterwards
    # the day has room for one prompt and 50 answer tokens, less than one request's 100.
    spent = 1000 - prompt - 50
    upstream.add(Reply(text="Big.", usage={"prompt_tokens": spent - 300, "completion_tokens": 300}))
    assert _ask(replica, token, max_tokens=500).status_code == 200
    deadline = time.monotonic() + 20
    while _usage(replica, token) != (spent, 0):  # the settlement commits after the stream
        assert time.monotonic() < deadline, _usage(replica, token)
        time.sleep(0.05)
    # The one admitted answer costs more than its hold (the upstream counts the prompt higher
    # than the estimate, the documented overshoot): nothing it settles frees room for another.
    real = {"prompt_tokens": prompt + 32, "completion_tokens": 50}
    upstream.add(Reply(text="ok", usage=real))
    engine = sa.create_engine(postgres.url)
    day = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    urls = [pg_hub.service if i % 2 else replica for i in range(20)]
    try:
        with ThreadPoolExecutor(20) as pool:
            with engine.connect() as lock, lock.begin():
                lock.execute(
                    sa.text(
                        "SELECT 1 FROM deeptutor_budget_day "
                        "WHERE student = 'carol' AND day = :day FOR UPDATE"
                    ),
                    {"day": day},
                )
                asked = [pool.submit(_ask, u, token) for u in urls]
                deadline = time.monotonic() + 30
                while _lock_waiters(engine) < 2:
                    assert time.monotonic() < deadline, "the replicas never waited"
                    time.sleep(0.02)
            statuses = sorted(f.result().status_code for f in asked)
    finally:
        engine.dispose()
    assert statuses == [200] + [429] * 19
    assert upstream.requests[-1].body["max_tokens"] == 50  # what was left, not the 100 asked
    deadline = time.monotonic() + 20
    while _usage(replica, token)[1]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert _usage(pg_hub.service, token) == (spent + prompt + 82, 0)


def test_mastery_reports_are_limited_once_across_replicas(pg_hub: Hub, replica: str) -> None:
    publish_objectives(pg_hub, "Limits")
    auth = {"Authorization": f"Bearer {pg_hub.token_for('dan', [SERVICE_SCOPE])}"}
    # The limit counts per UTC minute: start well inside one, so all reports fall in it.
    deadline = time.monotonic() + 15
    while dt.datetime.now(dt.UTC).second > 45:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    codes = [
        httpx.post(f"{url}/v1/mastery", json={"limits": 0.5}, headers=auth).status_code
        for url in [pg_hub.service, replica] * REPORTS_PER_MINUTE
    ]
    assert codes == [200] * REPORTS_PER_MINUTE + [429] * REPORTS_PER_MINUTE
