"""The panel's zh_CN catalog reaches the browser the JupyterLab way: the package's
`jupyterlab.locale` entry point, served by JupyterLab's own translations API in a real server
under the panel's gettext domain (the one labextension/src/i18n.ts loads)."""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from jupyterlab_server.translation_utils import get_installed_packages_locale

import deeptutor_jupyter

DOMAIN = "deeptutor_jupyter"
I18N_TS = Path(__file__).resolve().parents[2] / "labextension" / "src" / "i18n.ts"


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    return {"ServerApp": {"jpserver_extensions": {"jupyterlab": True, DOMAIN: True}}}


def test_the_domain_is_the_one_the_panel_loads() -> None:
    assert f"export const DOMAIN = '{DOMAIN}';" in I18N_TS.read_text(encoding="utf-8")


def test_the_entry_point_names_the_domain_and_the_package() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="jupyterlab.locale")}
    assert found.get(DOMAIN) == "deeptutor_jupyter"
    catalog = Path(deeptutor_jupyter.__file__).parent / "locale" / "zh_CN" / "LC_MESSAGES"
    assert (catalog / f"{DOMAIN}.json").is_file()


def test_jupyterlab_server_finds_the_catalog_for_zh_cn_only() -> None:
    data, message = get_installed_packages_locale("zh_CN")
    assert message == ""
    catalog = data[DOMAIN]
    assert catalog[""]["language"] == "zh-CN"  # as the browser's Gettext looks it up
    assert catalog["Chat"] == ["对话"]
    assert DOMAIN not in get_installed_packages_locale("fr_FR")[0]


def test_the_translations_api_serves_the_panels_domain(run: Any, jp_fetch: Any) -> None:
    response = run(jp_fetch("lab", "api", "translations", "zh_CN"))
    body = json.loads(response.body)
    data = body["data"]
    assert "jupyterlab" in data, body.get("message")  # the language pack is installed
    ours = data[DOMAIN]
    assert ours["Stop"] == ["停止"]
    assert ours["Notebook: %1"] == ["笔记本：%1"]
    assert ours["Key that sends a question"] == ["发送问题的按键"]  # schema titles too
    english = json.loads(run(jp_fetch("lab", "api", "translations", "en")).body)["data"]
    assert DOMAIN not in english
