"""Two replicas of the course service on one PostgreSQL share each student's budget.

Replica 1 is the hub's managed service (reached through the proxy); replica 2 is a second
process of the same service with the same settings, as a second pod would be on Kubernetes.
"""

from __future__ import annotations

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

from deeptutor_jupyter.hub.usage_stream import estimate_prompt_tokens
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.hub.harness import UPSTREAM_KEY, Hub, free_port
from tests.hub.postgres import Postgres
from tests.hub.test_gateway_hub import SERVICE_SCOPE

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
