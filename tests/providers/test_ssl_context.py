"""The SSL context of the model's client: made once, and not at all for plain local http."""

from __future__ import annotations

import ssl

import pytest

from deeptutor_jupyter.providers import _http
from deeptutor_jupyter.providers._http import HTTPModel, shared_ssl_context, ssl_context_for
from deeptutor_jupyter.providers.specs import find_provider


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def test_https_gets_one_shared_verifying_context() -> None:
    context = ssl_context_for("https://api.example.com/v1")
    assert context is shared_ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0  # the CA bundle is loaded


def test_plain_http_loads_no_ca_bundle_and_trusts_nothing() -> None:
    context = ssl_context_for("http://127.0.0.1:8000/v1")
    assert context is not shared_ssl_context()
    assert context.cert_store_stats()["x509_ca"] == 0
    # Were it ever used (an https redirect), it would refuse, never go unverified.
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_plain_http_through_a_proxy_keeps_the_verifying_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example.com:3128")
    assert ssl_context_for("http://127.0.0.1:8000/v1") is shared_ssl_context()


def test_ssl_cert_file_gets_its_own_context(monkeypatch: pytest.MonkeyPatch) -> None:
    import certifi

    default = shared_ssl_context()
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    mine = shared_ssl_context()
    assert mine is not default  # the variable is honoured as httpx does
    assert shared_ssl_context() is mine  # and made once for it too
    _http._SSL.pop((certifi.where(), ""), None)


def test_the_model_client_uses_it() -> None:
    spec = find_provider("custom")
    assert spec is not None
    model = HTTPModel(spec, model="m", base_url="https://api.example.com/v1", api_key="k")
    client = model._http()
    pool = client._transport._pool  # type: ignore[attr-defined]
    assert pool._ssl_context is shared_ssl_context()
