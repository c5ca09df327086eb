"""A real JupyterHub on loopback for the course-service tests.

JupyterHub with configurable-http-proxy (installed by scripts/test.sh into ``.venv/node``), the
dummy authenticator, the simple local-process spawner, and the course service added by
``deeptutor_jupyter.hub.configure`` exactly as a teacher would. Users: alice and bob (students),
ms-lee (instructor); a ``test-admin`` service token plays the hub admin.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from deeptutor_jupyter.testing.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
CHP = ROOT / ".venv" / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
UPSTREAM_KEY = "sk-course-UPSTREAM-9d41be"
STUDENTS = ("alice", "bob", "carol", "dan", "erin")
INSTRUCTOR = "ms-lee"


def chp_path() -> Path:
    found = CHP if CHP.exists() else shutil.which("configurable-http-proxy")
    if not found:
        pytest.skip(
            "configurable-http-proxy is not installed; scripts/test.sh installs it into "
            ".venv/node (npm install --prefix .venv/node configurable-http-proxy)"
        )
    return Path(found)


CONFIG = """
from deeptutor_jupyter.hub import configure
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.ConfigurableHTTPProxy.should_start = True
c.JupyterHub.db_url = "sqlite:///{tmp}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{tmp}/cookie_secret"
c.JupyterHub.pid_file = "{tmp}/jupyterhub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = "classroom"
c.Authenticator.allowed_users = {{"alice", "bob", "carol", "dan", "erin", "ms-lee"}}
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{tmp}/home/{{username}}"
# Tests run as root in CI; jupyter-server refuses root unless told.
c.Spawner.args = ["--allow-root"]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
# The spawner's own port pick (bind to 0, close, start the server) races the kernels of the
# test process running beside this one; ports below the ephemeral range are never taken so.
from deeptutor_jupyter.testing.ports import free_port as _free_port
def _single_user_port(spawner):
    spawner.port = _free_port()
c.Spawner.pre_spawn_hook = _single_user_port
c.JupyterHub.load_groups = {{
    "class-a": {{"users": ["alice", "bob"]}},
    "honours": {{"users": ["dan"]}},
}}
c.JupyterHub.services = [{{"name": "test-admin", "api_token": {admin_token!r}}}]
c.JupyterHub.load_roles = [{{
    "name": "test-admin-role",
    "scopes": ["admin:users", "admin:servers", "admin:server_state", "tokens", "admin:groups",
               "read:users", "list:users"],
    "services": ["test-admin"],
}}]
configure(
    c,
    upstream_url={upstream!r},
    models=["fake-model", "fake-large"],
    daily_tokens={daily_tokens},
    requests_per_minute=None,
    groups={groups!r},
    instructors={{"ms-lee"}},
    port={service_port},
    socket_dir="{tmp}/run",
    db_url={db_url!r},
    lti={lti!r},
)
"""


class Hub:
    def __init__(
        self,
        tmp: Path,
        upstream: str,
        *,
        daily_tokens: int = 100_000,
        groups: dict[str, Any] | None = None,
        db_url: str | None = None,
        lti: dict[str, Any] | None = None,
    ) -> None:
        self.tmp = tmp
        self.port, self.hub_port = free_port(), free_port()
        self.service_port = free_port()
        self.socket_path = tmp / "run" / "deeptutor.sock"  # where kernels reach the service
        self.admin_token = secrets.token_hex(16)
        self.db_url = db_url or f"sqlite:///{tmp}/deeptutor-hub.sqlite"
        config = CONFIG.format(
            port=self.port,
            hub_port=self.hub_port,
            proxy_api_port=free_port(),
            chp=str(chp_path()),
            tmp=tmp,
            admin_token=self.admin_token,
            upstream=upstream,
            daily_tokens=daily_tokens,
            groups=groups or {},
            service_port=self.service_port,
            db_url=self.db_url,
            lti=lti,
        )
        (tmp / "jupyterhub_config.py").write_text(config, encoding="utf-8")
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "DEEPTUTOR"))
        }
        env["DEEPTUTOR_UPSTREAM_API_KEY"] = UPSTREAM_KEY
        env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
        self.log = (tmp / "hub.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(tmp / "jupyterhub_config.py")],
            cwd=tmp,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        self.api = f"{self.url}/hub/api"
        self.service = f"{self.url}/services/deeptutor"
        self._wait_ready()

    def _wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"JupyterHub exited:\n{self.log_text()}")
            try:
                hub = httpx.get(f"{self.api}/", timeout=2)
                svc = httpx.get(f"{self.service}/v1/models", timeout=2)
                if hub.status_code == 200 and svc.status_code == 401:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"JupyterHub did not come up:\n{self.log_text()}")

    def log_text(self, whole: bool = False) -> str:
        if not self.log.closed:
            self.log.flush()
        text = (self.tmp / "hub.log").read_text(encoding="utf-8", errors="replace")
        return text if whole else text[-6000:]

    def admin(self, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"token {self.admin_token}"}
        return httpx.request(method, f"{self.api}{path}", headers=headers, timeout=30, **kw)

    def token_for(self, user: str, scopes: list[str] | None = None) -> str:
        """A token of ``user``, as the hub would give one (None: the owner's own scopes)."""
        body: dict[str, Any] = {"note": "test"}
        if scopes is not None:
            body["scopes"] = scopes
        r = self.admin("POST", f"/users/{user}/tokens", json=body)
        assert r.status_code == 201, r.text
        return str(r.json()["token"])

    def browser_login(self, user: str) -> httpx.Client:
        """A client logged in to the hub with the dummy authenticator's form, as a browser is."""
        client = httpx.Client(follow_redirects=True, timeout=30)
        client.get(f"{self.url}/hub/login")
        xsrf = client.cookies.get("_xsrf", "")
        # Not following the redirect: it would spawn the user's server, which is not needed here.
        r = client.post(
            f"{self.url}/hub/login",
            data={"username": user, "password": "classroom", "_xsrf": xsrf},
            follow_redirects=False,
        )
        assert r.status_code == 302, r.text[:500]
        return client

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def service_pid(hub: Hub) -> int | None:
    """The course service process the hub runs (its child running deeptutor_jupyter.hub)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == hub.proc.pid and b"deeptutor_jupyter.hub" in cmdline:
            return int(entry.name)
    return None
