"""The Kubernetes shapes in deploy/ (Zero to JupyterHub values, a replicas Deployment), checked
without a cluster: the Helm values' hub config is run through the real ``configure`` into a real
JupyterHub config and must describe the service the hub tests start; the Deployment must set every
variable the service reads, with the key and passwords from secrets, never as literals."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from jupyterhub.app import JupyterHub
from sqlalchemy.engine import make_url
from traitlets.config import Config

from deeptutor_jupyter.hub.configure import SERVICE_URL_ENV
from deeptutor_jupyter.hub.settings import load_config, upstream_key

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KEY = "sk-course-KEY-0123456789"


def values() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "zero-to-jupyterhub" / "config.yaml").read_text("utf-8"))


def hub_config(monkeypatch: pytest.MonkeyPatch) -> Config:
    """What the chart's hub pod runs: extraConfig with ``c``, the secrets in its environment."""
    hub = values()["hub"]
    for name in hub["extraEnv"]:
        monkeypatch.setenv(name, KEY if name == "DEEPTUTOR_UPSTREAM_API_KEY" else "pw")
    c = Config()
    for code in hub["extraConfig"].values():
        exec(compile(code, "extraConfig", "exec"), {"c": c, "get_config": lambda: c})
    return c


def test_the_helm_values_configure_the_service_the_hub_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = hub_config(monkeypatch)
    app = JupyterHub(config=c)  # the traits validate what extraConfig set
    [service] = [s for s in app.services if s["name"] == "deeptutor"]
    hub = values()["hub"]
    port = hub["service"]["extraPorts"][0]["targetPort"]
    assert service["url"] == f"http://0.0.0.0:{port}"
    assert hub["networkPolicy"]["ingress"][0]["ports"] == [{"port": port}]
    assert service["command"][1:] == ["-m", "deeptutor_jupyter.hub"]
    environment = service["environment"]
    config = load_config(environment)  # what the service itself reads at start
    assert config.upstream_url == "http://litellm.llm.svc:4000/v1"
    assert config.db_url and config.db_url.startswith("postgresql+psycopg://")
    assert make_url(config.db_url).password is None  # it reaches libpq as PGPASSWORD
    key = upstream_key(environment)
    assert key is not None and key.get_secret_value() == KEY
    # Students' pods reach it through the hub's Kubernetes service, on the same port.
    spawner_env = app.config.Spawner.environment
    assert spawner_env[SERVICE_URL_ENV].startswith(f"http://hub:{port}/services/deeptutor/")
    assert KEY not in json.dumps({k: v for k, v in spawner_env.items() if isinstance(v, str)})
    assert callable(spawner_env["DEEPTUTOR_HUB_TOKEN"])  # minted per spawn (hub/configure.py)
    roles = {r["name"]: r for r in app.load_roles}
    assert "access:services!service=deeptutor" in roles["user"]["scopes"]


def test_the_helm_values_hold_no_secret_in_clear() -> None:
    text = (DEPLOY / "zero-to-jupyterhub" / "config.yaml").read_text("utf-8")
    hub, singleuser = values()["hub"], values()["singleuser"]
    for name, spec in hub["extraEnv"].items():
        assert "secretKeyRef" in spec["valueFrom"], name
    assert "extraEnv" not in singleuser  # students' pods never get the key
    assert "sk-" not in text and ":secret@" not in text


def deployment() -> tuple[dict[str, Any], dict[str, Any]]:
    docs = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "deeptutor-replicas.yaml").read_text()))
    kinds = {d["kind"]: d for d in docs}
    return kinds["Deployment"], kinds["Service"]


def test_the_replicas_deployment_sets_what_the_service_reads() -> None:
    deploy, service = deployment()
    [container] = deploy["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    needed = {
        "JUPYTERHUB_API_URL",
        "JUPYTERHUB_API_TOKEN",
        "JUPYTERHUB_SERVICE_NAME",
        "JUPYTERHUB_SERVICE_PREFIX",
        "JUPYTERHUB_SERVICE_URL",
        "JUPYTERHUB_CLIENT_ID",
        "JUPYTERHUB_OAUTH_CALLBACK_URL",
        "DEEPTUTOR_HUB_CONFIG",
        "DEEPTUTOR_HUB_UPSTREAM_KEY",
    }
    assert needed <= set(env)
    for secret in ("JUPYTERHUB_API_TOKEN", "DEEPTUTOR_HUB_UPSTREAM_KEY", "PGPASSWORD"):
        assert "secretKeyRef" in env[secret]["valueFrom"], secret
    plain = {name: e["value"] for name, e in env.items() if "value" in e}
    config = load_config(plain)
    assert config.db_url and make_url(config.db_url).password is None  # PGPASSWORD has it
    assert container["command"] == ["python", "-m", "deeptutor_jupyter.hub"]
    port = int(plain["JUPYTERHUB_SERVICE_URL"].rsplit(":", 1)[1])
    assert container["ports"] == [{"containerPort": port}]
    assert service["spec"]["ports"][0]["targetPort"] == port
    assert deploy["spec"]["replicas"] > 1
    assert os.environ.get("DEEPTUTOR_HUB_UPSTREAM_KEY") is None  # nothing leaked into the test
