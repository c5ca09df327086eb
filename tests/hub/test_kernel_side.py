"""The kernel side of the course service: settings detection and how refusals are worded."""

from __future__ import annotations

import json
from pathlib import Path

from deeptutor_jupyter.config import hub_service, render_settings_markdown, resolve_settings
from deeptutor_jupyter.providers.errors import Endpoint, HTTPStatusFailure, from_status
from deeptutor_jupyter.providers.retry import is_retryable
from deeptutor_jupyter.providers.specs import find_provider

TOKEN = "hubtoken0123456789abcdef"


def hub_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "DEEPTUTOR_HOME": str(tmp_path),
        "DEEPTUTOR_HUB_SERVICE_URL": "http://hub:10101/services/deeptutor/v1/",
        "DEEPTUTOR_HUB_SERVICE_NAME": "deeptutor",
        "DEEPTUTOR_HUB_MODEL": "deepseek-chat",
        "JUPYTERHUB_API_TOKEN": TOKEN,
        **extra,
    }


def test_a_kernel_spawned_by_the_hub_uses_the_course_service(tmp_path: Path) -> None:
    resolved = resolve_settings(environ=hub_env(tmp_path))
    s = resolved.settings
    assert (s.provider, s.model) == ("hub", "deepseek-chat")
    assert s.base_url == "http://hub:10101/services/deeptutor/v1"
    assert s.api_key is not None and s.api_key.get_secret_value() == TOKEN
    assert resolved.ready
    shown = render_settings_markdown(resolved)
    assert "Model provided by your course (hub service `deeptutor`" in shown
    assert TOKEN not in shown


def test_a_personal_key_never_goes_to_the_course_service(tmp_path: Path) -> None:
    resolved = resolve_settings(environ=hub_env(tmp_path, DEEPTUTOR_API_KEY="sk-mine-personal"))
    assert resolved.settings.provider == "hub"
    assert resolved.settings.api_key is not None
    assert resolved.settings.api_key.get_secret_value() == TOKEN


def test_the_students_own_choice_wins_over_the_course(tmp_path: Path) -> None:
    env = hub_env(tmp_path, DEEPTUTOR_PROVIDER="deepseek", DEEPSEEK_API_KEY="sk-own-1234567890")
    s = resolve_settings(environ=env).settings
    assert s.provider == "deepseek"
    assert s.base_url == "https://api.deepseek.com/v1"
    assert s.api_key is not None and s.api_key.get_secret_value() == "sk-own-1234567890"


def test_a_hub_without_the_service_is_not_taken_for_one(tmp_path: Path) -> None:
    env = {"DEEPTUTOR_HOME": str(tmp_path), "JUPYTERHUB_API_TOKEN": TOKEN}
    assert hub_service(env) is None
    assert resolve_settings(environ=env).settings.provider is None


def test_a_course_refusal_is_shown_in_its_own_words_and_not_retried() -> None:
    spec = find_provider("hub")
    assert spec is not None
    endpoint = Endpoint(spec, "http://hub/services/deeptutor/v1", "deepseek-chat", TOKEN)
    words = (
        "You have used today's tutor budget; it resets at 00:00 UTC. Ask your instructor for more."
    )
    body = json.dumps(
        {"error": {"message": words, "type": "course_service", "code": "budget_exhausted"}}
    )
    error = from_status(endpoint, 429, body)
    assert (error.kind, error.message) == ("rate_limit", words)
    assert not is_retryable(HTTPStatusFailure(429, body))
    minute = json.dumps(
        {"error": {"message": "Wait a minute.", "type": "course_service", "code": "rate_limited"}}
    )
    assert is_retryable(HTTPStatusFailure(429, minute))
    key = {"message": "The model server refused the course's key.", "type": "course_service"}
    refused_key = json.dumps({"error": {**key, "code": "upstream_key_rejected"}})
    assert not is_retryable(HTTPStatusFailure(502, refused_key))
    assert from_status(endpoint, 502, refused_key).message == key["message"]
    # An upstream's own 429 is still worded as a provider's limit.
    upstream = from_status(endpoint, 429, json.dumps({"error": {"message": "Slow down"}}))
    assert "limiting how many requests" in upstream.message and "Slow down" in upstream.message


def test_the_hub_token_goes_only_to_the_hubs_service_url(tmp_path: Path) -> None:
    # provider hub named alone: the course's address, and the token with it
    named = resolve_settings(environ=hub_env(tmp_path, DEEPTUTOR_PROVIDER="hub")).settings
    assert named.base_url == "http://hub:10101/services/deeptutor/v1"
    assert named.api_key is not None and named.api_key.get_secret_value() == TOKEN
    same = resolve_settings(
        environ=hub_env(
            tmp_path,
            DEEPTUTOR_PROVIDER="hub",
            DEEPTUTOR_BASE_URL="http://hub:10101/services/deeptutor/v1/",
        )
    )
    assert same.settings.api_key is not None and same.ready
    # another URL never receives it, whichever layer set it, and the learner is told why
    elsewhere = resolve_settings(
        environ=hub_env(tmp_path, DEEPTUTOR_PROVIDER="hub", DEEPTUTOR_HUB_TOKEN=TOKEN + "svc"),
        flags={"base_url": "http://collector.example:8000/v1"},
    )
    assert elsewhere.settings.base_url == "http://collector.example:8000/v1"
    assert elsewhere.settings.api_key is None and not elsewhere.ready
    [problem] = elsewhere.problems
    assert "sent only to the hub's service URL" in problem
    assert "http://hub:10101/services/deeptutor/v1" in problem and TOKEN not in problem
    assert elsewhere.missing() == [problem]
    shown = render_settings_markdown(elsewhere)
    assert TOKEN not in shown and "sent only to the hub's service URL" in shown
    # without an announced service there is no URL the token may go to
    bare = {"DEEPTUTOR_HOME": str(tmp_path), "JUPYTERHUB_API_TOKEN": TOKEN}
    alone = resolve_settings(
        environ={**bare, "DEEPTUTOR_PROVIDER": "hub", "DEEPTUTOR_BASE_URL": "http://x:1/v1"}
    )
    assert alone.settings.api_key is None
    assert "DEEPTUTOR_HUB_SERVICE_URL is not set" in alone.problems[0]
