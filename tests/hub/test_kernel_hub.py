"""A student's kernel on a server the hub spawned uses the course service with zero set-up.

The hub spawns alice's single-user server (SimpleLocalProcessSpawner); the test starts a real
kernel with exactly the environment the hub gave that server (read from /proc), so the kernel
holds the hub-issued ``JUPYTERHUB_API_TOKEN`` and the ``DEEPTUTOR_HUB_*`` entries of
``c.Spawner.environment``, and nothing else from the test.
"""

from __future__ import annotations

import asyncio
import html
import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from deeptutor_jupyter.providers.hub_link import NotTheService, hub_async_client, hub_client
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.e2e.kernel_driver import KernelDriver, loaded_kernel
from tests.hub.harness import UPSTREAM_KEY, Hub
from tests.hub.squat import PortSquatter, socket_of_another_user
from tests.hub.test_gateway_hub import upstream_connection_open

pytestmark = [pytest.mark.hub, pytest.mark.e2e]

BUDGET_WORDS = "You have used today's tutor budget; it resets at 00:00 UTC."


def server_environ(hub: Hub, user: str) -> dict[str, str]:
    r = hub.admin("POST", f"/users/{user}/server")
    assert r.status_code in (201, 202), r.text
    deadline = time.monotonic() + 120
    while True:
        model = hub.admin("GET", f"/users/{user}").json()
        server = model.get("servers", {}).get("")
        if server and server.get("ready"):
            pid = int(server["state"]["pid"])
            break
        assert time.monotonic() < deadline, hub.log_text()
        time.sleep(0.3)
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


@pytest.fixture(scope="module")
def alice_env(hub: Hub) -> Iterator[dict[str, str]]:
    env = server_environ(hub, "alice")
    try:
        yield env
    finally:
        hub.admin("DELETE", "/users/alice/server")


@pytest.fixture
def alice_kernel(alice_env: dict[str, str], tmp_path: Path) -> Iterator[KernelDriver]:
    env = dict(alice_env)
    env.update(
        DEEPTUTOR_HOME=str(tmp_path / "home"),
        DEEPTUTOR_AUTO_CONSOLIDATE="false",
        JPY_SESSION_NAME=str(tmp_path / "lesson.ipynb"),
        IPYTHONDIR=str(tmp_path / "ipython"),
    )
    with loaded_kernel(env, tmp_path) as driver:
        yield driver


def turn_view(k: KernelDriver) -> str:
    return str(k.wait_for(lambda: k.with_class("dt-turn") and k.with_class("dt-turn")[-1]))


def error_text(k: KernelDriver, view: str) -> str:
    return "\n".join(
        str(k.widgets[c]["value"]) for c in k.with_class("dt-error") if c in k.descendants(view)
    )


def test_the_key_is_nowhere_in_the_students_server(alice_env: dict[str, str]) -> None:
    assert alice_env["DEEPTUTOR_HUB_SERVICE_URL"].endswith("/services/deeptutor/v1")
    assert alice_env["JUPYTERHUB_API_TOKEN"]
    assert UPSTREAM_KEY not in json.dumps(alice_env)


def test_the_kernel_token_opens_nothing_but_the_tutor(hub: Hub, alice_env: dict[str, str]) -> None:
    """Should a token ever leak, the kernel's opens no server; the server's own is refused."""
    token = alice_env["DEEPTUTOR_HUB_TOKEN"]
    assert token != alice_env["JUPYTERHUB_API_TOKEN"]
    opened = httpx.get(
        f"{hub.url}/user/alice/api/contents",
        headers={"Authorization": f"token {token}"},
        follow_redirects=False,
        timeout=30,
    )
    assert opened.status_code == 403, opened.status_code
    models = httpx.get(
        f"{hub.service}/v1/models", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert models.status_code == 200
    server_token = {"Authorization": f"Bearer {alice_env['JUPYTERHUB_API_TOKEN']}"}
    assert httpx.get(f"{hub.service}/v1/models", headers=server_token).status_code == 403


def test_a_process_on_the_services_port_receives_nothing(
    alice_env: dict[str, str], upstream: FakeLLMServer, tmp_path: Path
) -> None:
    """S2: after a crash a student's process bound the service's port and received the next
    kernel's token. Kernels on the hub's machine now use the service's socket, never a port:
    a process listening at the service URL the kernel was given gets no connection at all."""
    squatter = PortSquatter()
    env = dict(alice_env)
    env.update(
        DEEPTUTOR_HUB_SERVICE_URL=f"http://127.0.0.1:{squatter.port}/services/deeptutor/v1",
        DEEPTUTOR_HOME=str(tmp_path / "home"),
        DEEPTUTOR_AUTO_CONSOLIDATE="false",
        JPY_SESSION_NAME=str(tmp_path / "lesson.ipynb"),
        IPYTHONDIR=str(tmp_path / "ipython"),
    )
    upstream.add(Reply(text="Through the socket."))
    try:
        with loaded_kernel(env, tmp_path) as k:
            k.execute("%tutor What is a limit?")
            view = turn_view(k)
            k.wait_for(lambda: k.markdown_in(view) == "Through the socket.", timeout=60)
            said = json.dumps([m["content"] for m in k.outputs_of(k.execute("%tutor budget"))])
            assert "Today's tutor budget" in said
    finally:
        squatter.close()
    assert squatter.connections == 0


def test_a_socket_held_by_another_user_receives_no_token(
    hub: Hub, alice_env: dict[str, str]
) -> None:
    """A socket the kernel is pointed at but that another uid holds (SO_PEERCRED) is closed
    before a byte is sent, by the blocking client (packs, mastery, budget, the CLI) and the
    asyncio one (the model's stream). The same token goes through the service's own socket."""
    url = f"{alice_env['DEEPTUTOR_HUB_SERVICE_URL']}/models"
    auth = {"Authorization": f"Bearer {alice_env['DEEPTUTOR_HUB_TOKEN']}"}
    service_socket = Path(alice_env["DEEPTUTOR_HUB_SERVICE_SOCKET"])
    assert stat.S_IMODE(service_socket.parent.stat().st_mode) == 0o755
    with hub_client(alice_env, timeout=30) as client:
        assert client.get(url, headers=auth).status_code == 200

    async def fetch(env: dict[str, str]) -> int:
        async with hub_async_client(env, timeout=30) as client:
            return (await client.get(url, headers=auth)).status_code

    assert asyncio.run(fetch(alice_env)) == 200
    with socket_of_another_user() as squatter:
        env = {**alice_env, "DEEPTUTOR_HUB_SERVICE_SOCKET": squatter.path}
        refused = pytest.raises(NotTheService, match=r"held by uid 65534, not the service")
        with refused, hub_client(env, timeout=30) as client:
            client.get(url, headers=auth)
        assert (squatter.said(), squatter.said()) == ("connected", "received 0 bytes")
        with pytest.raises(NotTheService, match=r"held by uid 65534"):
            asyncio.run(fetch(env))
        assert (squatter.said(), squatter.said()) == ("connected", "received 0 bytes")


def test_tutor_in_a_students_kernel_goes_through_the_course_service(
    alice_kernel: KernelDriver, upstream: FakeLLMServer, tmp_path: Path
) -> None:
    k = alice_kernel
    shown = json.dumps([m["content"] for m in k.outputs_of(k.execute("%tutor config"))])
    assert "Model provided by your course (hub service `deeptutor`" in shown
    assert "fake-model" in shown

    upstream.clear_requests()
    upstream.add(
        Reply(
            text="A limit is where values head.",
            usage={"prompt_tokens": 20, "completion_tokens": 8},
        )
    )
    k.execute("%tutor What is a limit?")
    view = turn_view(k)
    k.wait_for(lambda: k.markdown_in(view) == "A limit is where values head.")
    sent = upstream.requests[-1]
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert sent.body["messages"][-1]["content"] == "What is a limit?"

    everything = json.dumps([m["content"] for m in k.iopub]) + json.dumps(k.widgets)
    assert UPSTREAM_KEY not in everything
    home_files = [p for p in (tmp_path / "home").rglob("*") if p.is_file()]
    assert home_files  # the turn was stored
    assert not any(UPSTREAM_KEY.encode() in p.read_bytes() for p in home_files)


def test_stop_in_the_students_cell_closes_the_upstream_request(
    alice_kernel: KernelDriver, upstream: FakeLLMServer
) -> None:
    k = alice_kernel
    upstream.clear_requests()
    upstream.add(Reply(chunks=[f"w{i} " for i in range(2000)], chunk_delay=0.02))
    k.execute("%tutor Tell me a long story.")
    view = turn_view(k)
    k.wait_for(lambda: "w3" in k.markdown_in(view))
    port = upstream.requests[-1].client_port
    assert upstream_connection_open(upstream, port)
    stop = next(b for b in k.with_class("dt-stop") if b in k.descendants(view))
    k.click(stop)
    # The kernel closes its request to the service, and the service its request upstream,
    # long before the 2000 chunks (40 s) are out.
    k.wait_for(lambda: not upstream_connection_open(upstream, port))


def test_a_spent_budget_shows_a_card_in_the_students_cell(
    alice_kernel: KernelDriver, upstream: FakeLLMServer
) -> None:
    k = alice_kernel
    # This module's hub gives 20,000 tokens a day; one big answer spends them.
    upstream.add(Reply(text="Long.", usage={"prompt_tokens": 14_000, "completion_tokens": 7_000}))
    k.execute("%tutor Explain everything.")
    first = turn_view(k)
    k.wait_for(lambda: k.markdown_in(first) == "Long.")
    upstream.clear_requests()
    k.execute("%tutor And once more?")
    view = k.wait_for(lambda: [v for v in k.with_class("dt-turn") if v != first] or None)[0]
    text = html.unescape(k.wait_for(lambda: error_text(k, view), timeout=60))
    assert BUDGET_WORDS in text
    assert "Ask your instructor for more." in text
    assert upstream.requests == []
    # The student can see it coming: %tutor budget says what is used and left today.
    said = json.dumps([m["content"] for m in k.outputs_of(k.execute("%tutor budget"))])
    assert "of 20,000 tokens used" in said and "**0 left**" in said
    assert "resets at 00:00 UTC" in said
