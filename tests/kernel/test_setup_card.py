from __future__ import annotations

import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import pytest

from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.kernel.widgets.setup_card import CHOICES, SetupCard
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from deeptutor_jupyter.testing.ports import refused_port

SECRET = "sk-CARDSECRET-never-in-state-0a1b2c3d"
SECRET_BODY = "CARDSECRET"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def make_card(home: Path, language: str = "en", **env: str) -> SetupCard:
    environ = {"DEEPTUTOR_HOME": str(home), **env}
    return SetupCard(resolve_settings(environ=environ), language=language, environ=environ)


def walk(widget: Any) -> Iterator[Any]:
    yield widget
    for child in getattr(widget, "children", ()):
        yield from walk(child)
    layout = getattr(widget, "layout", None)
    if isinstance(layout, widgets.Widget):
        yield layout


def all_state(card: SetupCard) -> str:
    return repr([w.get_state() for w in walk(card)])


def visible(widget: Any) -> bool:
    return bool(widget.layout.display != "none")


def saved(home: Path) -> dict[str, Any]:
    return tomllib.loads((home / "settings.toml").read_text(encoding="utf-8"))


def test_card_lists_what_is_missing_and_offers_the_five_choices(home: Path) -> None:
    card = make_card(home)
    header = card.children[0].value
    assert "provider" in header
    assert [value for _, value in card.provider.options] == list(CHOICES)
    labels = [label for label, _ in card.provider.options]
    assert labels == ["OpenAI", "DeepSeek", "Anthropic", "Ollama (local)", "OpenAI-compatible URL"]
    assert card.provider.value == "openai"
    assert card.model.value == "gpt-4o-mini"
    assert isinstance(card.api_key, widgets.Password)
    assert card.instructions.selected_index is None  # collapsed
    markdown = card.instructions.children[0].outputs[0]["data"]["text/markdown"]
    assert "ollama serve" in markdown


def test_save_writes_private_settings_and_clears_the_key(home: Path) -> None:
    card = make_card(home)
    card.provider.value = "deepseek"
    assert card.model.value == "deepseek-chat"
    assert not visible(card.base_url)
    card.api_key.value = SECRET
    card.save_button.click()

    path = home / "settings.toml"
    assert saved(home) == {"provider": "deepseek", "model": "deepseek-chat", "api_key": SECRET}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert card.api_key.value == ""
    assert card.saved_path == path
    assert f"Saved to {path}. Nothing else is needed" in card.status.value
    assert card.status.value.endswith("Run your %tutor cell again.</span>")
    assert SECRET_BODY not in all_state(card)
    resolved = resolve_settings(environ={"DEEPTUTOR_HOME": str(home)})
    assert resolved.ready


def test_secret_not_in_state_after_validation_message(home: Path) -> None:
    card = make_card(home)
    card.api_key.value = SECRET
    card.model.value = "  "
    card.save_button.click()
    assert "Enter a model name." in card.status.value
    assert not (home / "settings.toml").exists()
    # Only the Password widget may hold it until a successful save; nothing else renders it.
    states = [w.get_state() for w in walk(card) if w is not card.api_key]
    assert SECRET_BODY not in repr(states)


def test_missing_key_is_refused(home: Path) -> None:
    card = make_card(home)
    card.provider.value = "anthropic"
    card.save_button.click()
    assert "ANTHROPIC_API_KEY" in card.status.value
    assert not (home / "settings.toml").exists()


def test_key_from_environment_is_enough(home: Path) -> None:
    card = make_card(home, DEEPSEEK_API_KEY="d" * 20, DEEPTUTOR_PROVIDER="deepseek")
    assert card.provider.value == "deepseek"
    assert "DEEPSEEK_API_KEY" in card.api_key.placeholder
    card.model.value = "deepseek-reasoner"
    card.save_button.click()
    assert saved(home) == {"provider": "deepseek", "model": "deepseek-reasoner"}


def test_ollama_needs_no_key_and_shows_the_local_url(home: Path) -> None:
    card = make_card(home)
    card.provider.value = "ollama"
    assert not visible(card.api_key)
    assert visible(card.base_url)
    assert card.base_url.value == "http://localhost:11434/v1"
    card.save_button.click()
    assert saved(home) == {
        "provider": "ollama",
        "model": "llama3.1",
        "base_url": "http://localhost:11434/v1",
    }


def test_custom_url_needs_url_and_model_key_optional(home: Path) -> None:
    card = make_card(home)
    card.provider.value = "openai-compatible"
    assert visible(card.base_url) and visible(card.api_key)
    assert card.api_key.description == "API key (optional)"
    card.model.value = "qwen2.5"
    card.save_button.click()
    assert "base URL" in card.status.value
    assert not (home / "settings.toml").exists()
    card.base_url.value = "http://gpu-box:8000/v1"
    card.api_key.value = SECRET
    card.save_button.click()
    assert saved(home) == {
        "provider": "openai-compatible",
        "model": "qwen2.5",
        "base_url": "http://gpu-box:8000/v1",
        "api_key": SECRET,
    }
    assert SECRET_BODY not in all_state(card)


def test_switching_provider_drops_stale_url_and_foreign_key(home: Path) -> None:
    card = make_card(home)
    card.provider.value = "openai-compatible"
    card.base_url.value = "http://old:1/v1"
    card.model.value = "m"
    card.api_key.value = SECRET
    card.save_button.click()

    card.provider.value = "ollama"
    card.save_button.click()
    data = saved(home)
    assert data["provider"] == "ollama"
    assert "api_key" not in data
    assert data["base_url"] == "http://localhost:11434/v1"


def test_resaving_same_provider_keeps_saved_key(home: Path) -> None:
    card = make_card(home)
    card.api_key.value = SECRET
    card.save_button.click()
    card.model.value = "gpt-4.1"
    card.save_button.click()
    assert saved(home) == {"provider": "openai", "model": "gpt-4.1", "api_key": SECRET}
    assert card.api_key.placeholder == "already saved; leave empty to keep it"


def test_preserves_other_settings(home: Path) -> None:
    home.mkdir()
    (home / "settings.toml").write_text("max_rounds = 3\n[memory]\non = true\n")
    card = make_card(home)
    card.provider.value = "ollama"
    card.save_button.click()
    data = saved(home)
    assert data["max_rounds"] == 3 and data["memory"] == {"on": True}


def test_unparsable_file_is_reported_not_overwritten(home: Path) -> None:
    home.mkdir()
    (home / "settings.toml").write_text("= broken")
    card = make_card(home)
    card.api_key.value = SECRET
    card.save_button.click()
    assert "Could not save" in card.status.value
    assert SECRET_BODY not in card.status.value
    assert (home / "settings.toml").read_text() == "= broken"


def test_on_saved_callback(home: Path) -> None:
    seen: list[Path] = []
    environ = {"DEEPTUTOR_HOME": str(home)}
    card = SetupCard(resolve_settings(environ=environ), environ=environ, on_saved=seen.append)
    card.provider.value = "ollama"
    card.save_button.click()
    assert seen == [home / "settings.toml"]


def test_a_card_that_runs_the_question_itself_does_not_ask_to_run_the_cell_again(
    home: Path,
) -> None:
    environ = {"DEEPTUTOR_HOME": str(home)}
    card = SetupCard(resolve_settings(environ=environ), environ=environ, reruns=True)
    card.provider.value = "openai"
    card.save_button.click()  # no key yet: nothing runs, nothing promised
    assert "Still needed" in card.header.value and "below" not in card.status.value
    assert "cell again" not in card.status.value
    card.api_key.value = SECRET
    card.save_button.click()
    assert "Your question runs now, below." in card.status.value
    assert "cell again" not in card.status.value


def test_chinese_strings(home: Path) -> None:
    card = make_card(home, language="zh")
    assert "为 DeepTutor 连接一个模型" in card.children[0].value
    assert "Ollama（本机）" in [label for label, _ in card.provider.options]
    assert card.save_button.description == "保存"
    card.provider.value = "ollama"
    card.save_button.click()
    assert "已保存到" in card.status.value
    markdown = card.instructions.children[0].outputs[0]["data"]["text/markdown"]
    assert "ollama serve" in markdown and "本机" in markdown


def test_language_follows_resolved_settings(home: Path) -> None:
    environ = {"DEEPTUTOR_HOME": str(home), "LANG": "zh_CN.UTF-8"}
    card = SetupCard(resolve_settings(environ=environ), environ=environ)
    assert card.language == "zh"
    assert card.home == home


def test_labels_have_room_and_every_field_a_placeholder(home: Path) -> None:
    card = make_card(home)
    for field in (card.provider, card.model, card.base_url, card.api_key):
        assert field.style.description_width == "9em"  # "API key (optional)" fits
    card.provider.value = "openai-compatible"
    assert card.model.placeholder == "model name, e.g. gpt-4o-mini"
    assert card.base_url.placeholder == "e.g. http://localhost:8000/v1"
    card.provider.value = "ollama"
    assert card.model.placeholder.startswith("model name, e.g. ")
    assert card.base_url.placeholder.startswith("e.g. http://")


def test_after_save_the_still_needed_line_is_current(home: Path) -> None:
    card = make_card(home)
    assert "Still needed:" in card.header.value
    card.provider.value = "ollama"
    card.model.value = "llama3.2"
    card.save_button.click()
    assert "Still needed:" not in card.header.value and card.missing == []
    assert "the tutor is ready" in card.status.value


def setup_for(home: Path, url: str) -> SetupCard:
    card = make_card(home)
    card.provider.value = "openai-compatible"
    card.model.value = "fake-model"
    card.base_url.value = url
    card.api_key.value = SECRET
    return card


async def test_test_connection_sends_one_short_request(home: Path) -> None:
    with FakeLLMServer([Reply(text="OK")], api_key=SECRET) as server:
        card = setup_for(home, server.url)
        card.test_button.click()
        assert card.test_task is not None and card.test_button.disabled
        await card.test_task
    assert "Connected: fake-model at" in card.status.value and not card.test_button.disabled
    [request] = server.requests
    assert request.body["max_tokens"] == 5 and "tools" not in request.body
    assert not (home / "settings.toml").exists()  # testing saves nothing


async def test_a_failed_test_reads_like_the_error_card(home: Path) -> None:
    with FakeLLMServer([Reply(text="OK")], api_key="sk-the-real-one") as server:
        card = setup_for(home, server.url)
        await card.test_connection()
    assert "The test request failed:" in card.status.value and "How to fix:" in card.status.value
    assert "<code>%tutor config</code>" in card.status.value
    assert "key" in card.status.value.lower() and SECRET not in card.status.value

    closed = refused_port()
    card = setup_for(home, f"http://127.0.0.1:{closed}/v1")
    await card.test_connection()
    assert "The test request failed:" in card.status.value
    assert f"127.0.0.1:{closed}" in card.status.value or "connect" in card.status.value.lower()
