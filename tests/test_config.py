from __future__ import annotations

import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from deeptutor_jupyter.config import (
    ResolvedSettings,
    Settings,
    SettingsFileError,
    describe_settings,
    mask_secret,
    render_settings_markdown,
    resolve_settings,
    save_lab_language,
    settings_path,
    setup_instructions_markdown,
    write_settings,
)

SECRET = "sk-TOPSECRET-do-not-leak-9f8e7d6c5b4a"
SECRET_BODY = "TOPSECRET-do-not-leak"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "dt-home"


def env_for(home: Path, **extra: str) -> dict[str, str]:
    return {"DEEPTUTOR_HOME": str(home), **extra}


def write_toml(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "settings.toml"
    path.write_text(text, encoding="utf-8")
    return path


# --- precedence --------------------------------------------------------------------------------


def test_defaults_when_nothing_is_configured(home: Path) -> None:
    r = resolve_settings(environ=env_for(home))
    s = r.settings
    assert (s.provider, s.model, s.base_url, s.api_key) == (None, None, None, None)
    assert (s.timeout, s.connect_timeout, s.max_rounds) == (60.0, 10.0, 8)
    assert s.max_tokens is None and s.temperature is None and s.trace_in_outputs is True
    assert s.home == home
    assert r.sources["model"] == "default"
    assert r.sources["home"] == "env DEEPTUTOR_HOME"
    assert r.problems == []
    assert not r.ready
    assert "provider" in r.missing()[0]


def test_home_defaults_to_dot_deeptutor(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    r = resolve_settings(environ={})
    assert r.settings.home == tmp_path / ".deeptutor"
    assert settings_path(environ={}) == tmp_path / ".deeptutor" / "settings.toml"
    assert settings_path(home=Path("/x")) == Path("/x/settings.toml")


def test_each_layer_overrides_the_one_below(home: Path) -> None:
    write_toml(home, 'provider = "deepseek"\nmodel = "from-file"\nmax_rounds = 3\ntimeout = 5\n')
    env = env_for(home, DEEPTUTOR_MODEL="from-env", DEEPTUTOR_MAX_ROUNDS="4")

    r = resolve_settings(environ=env)
    assert r.settings.model == "from-env"
    assert r.sources["model"] == "env DEEPTUTOR_MODEL"
    assert r.settings.max_rounds == 4
    assert r.settings.timeout == 5.0 and r.sources["timeout"] == "settings.toml"
    assert r.settings.provider == "deepseek" and r.sources["provider"] == "settings.toml"

    r = resolve_settings(environ=env, traits={"model": "from-trait", "max_rounds": 5})
    assert r.settings.model == "from-trait"
    assert r.sources["model"] == "c.TutorMagics.model"
    assert r.sources["max_rounds"] == "c.TutorMagics.max_rounds"

    r = resolve_settings(
        environ=env,
        traits={"model": "from-trait", "max_rounds": 5},
        flags={"model": "from-flag", "max_rounds": 6},
    )
    assert r.settings.model == "from-flag"
    assert r.sources["model"] == "--model"
    assert (r.settings.max_rounds, r.sources["max_rounds"]) == (6, "--max-rounds")


def test_none_and_blank_mean_not_given(home: Path) -> None:
    env = env_for(home, DEEPTUTOR_MODEL="from-env", DEEPTUTOR_BASE_URL="")
    r = resolve_settings(environ=env, traits={"model": ""}, flags={"model": None})
    assert r.settings.model == "from-env"
    assert r.settings.base_url is None


def test_unknown_trait_and_flag_names_are_not_settings(home: Path) -> None:
    r = resolve_settings(environ=env_for(home), traits={"tools": "x"}, flags={"capability": "q"})
    assert r.problems == []


def test_home_from_flag_picks_its_settings_file(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_toml(a, 'model = "model-a"\n')
    write_toml(b, 'model = "model-b"\n')
    r = resolve_settings(environ=env_for(a), flags={"home": str(b)})
    assert r.settings.home == b
    assert r.settings.model == "model-b"
    assert r.sources["home"] == "--home"


def test_home_in_settings_file_is_a_problem(home: Path) -> None:
    write_toml(home, 'home = "/elsewhere"\n')
    r = resolve_settings(environ=env_for(home))
    assert r.settings.home == home
    assert any("home" in p for p in r.problems)


# --- provider ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("var", "provider"),
    [
        ("OPENAI_API_KEY", "openai"),
        ("DEEPSEEK_API_KEY", "deepseek"),
        ("ANTHROPIC_API_KEY", "anthropic"),
        ("GOOGLE_API_KEY", "gemini"),
    ],
)
def test_provider_inferred_from_key_variable(home: Path, var: str, provider: str) -> None:
    r = resolve_settings(environ=env_for(home, **{var: SECRET}))
    assert r.settings.provider == provider
    assert r.sources["provider"] == f"inferred from env {var}"
    assert r.settings.api_key is not None
    assert r.settings.api_key.get_secret_value() == SECRET
    assert r.sources["api_key"] == f"env {var}"
    assert r.sources["model"] == "provider default"
    assert r.settings.model
    assert r.ready


def test_inference_follows_table_order(home: Path) -> None:
    r = resolve_settings(environ=env_for(home, DEEPSEEK_API_KEY="k" * 20, OPENAI_API_KEY="o" * 20))
    assert r.settings.provider == "openai"


def test_base_url_env_infers_custom_provider(home: Path) -> None:
    env = env_for(home, DEEPTUTOR_BASE_URL="http://box:8000/v1", OPENAI_API_KEY="o" * 20)
    r = resolve_settings(environ=env)
    assert r.settings.provider == "openai-compatible"
    assert r.sources["provider"] == "inferred from env DEEPTUTOR_BASE_URL"
    assert r.settings.base_url == "http://box:8000/v1"
    # The OpenAI key is not the custom server's key: it must not be sent there.
    assert r.settings.api_key is None
    assert r.missing() == ["a model name for OpenAI-compatible server"]


def test_explicit_provider_beats_inference(home: Path) -> None:
    env = env_for(home, DEEPTUTOR_PROVIDER="deepseek", OPENAI_API_KEY="o" * 20)
    r = resolve_settings(environ=env)
    assert r.settings.provider == "deepseek"
    assert r.sources["provider"] == "env DEEPTUTOR_PROVIDER"
    assert r.settings.api_key is None
    assert not r.ready
    assert any("DEEPSEEK_API_KEY" in m for m in r.missing())


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [("claude", "anthropic"), (" Custom ", "openai-compatible"), ("QWEN", "dashscope")],
)
def test_aliases_are_normalised(home: Path, alias: str, canonical: str) -> None:
    r = resolve_settings(environ=env_for(home), flags={"provider": alias})
    assert r.settings.provider == canonical
    assert Settings(provider=alias).provider == canonical


def test_unknown_provider_is_a_problem_and_not_guessed(home: Path) -> None:
    r = resolve_settings(
        environ=env_for(home, OPENAI_API_KEY="o" * 20), flags={"provider": "opnai"}
    )
    assert r.settings.provider is None
    assert any("--provider" in p and "opnai" in p for p in r.problems)
    assert not r.ready


def test_unknown_provider_falls_back_to_lower_layer(home: Path) -> None:
    r = resolve_settings(
        environ=env_for(home, DEEPTUTOR_PROVIDER="ollama"), flags={"provider": "x"}
    )
    assert r.settings.provider == "ollama"
    assert len(r.problems) == 1


def test_local_provider_needs_no_key(home: Path) -> None:
    r = resolve_settings(environ=env_for(home, DEEPTUTOR_PROVIDER="ollama"))
    assert r.ready
    assert r.settings.base_url == "http://localhost:11434/v1"
    assert r.settings.api_key is None


def test_provider_without_default_base_url_asks_for_one(home: Path) -> None:
    r = resolve_settings(
        environ=env_for(home, DEEPTUTOR_PROVIDER="azure", AZURE_OPENAI_API_KEY="a" * 20)
    )
    assert not r.ready
    assert any("base URL" in m for m in r.missing())
    assert any("model" in m for m in r.missing())


# --- the key -----------------------------------------------------------------------------------


def test_key_precedence(home: Path) -> None:
    write_toml(home, f'provider = "openai"\napi_key = "{"f" * 20}"\n')
    r = resolve_settings(environ=env_for(home))
    assert r.sources["api_key"] == "settings.toml"
    r = resolve_settings(environ=env_for(home, OPENAI_API_KEY="e" * 20))
    assert r.sources["api_key"] == "env OPENAI_API_KEY"
    r = resolve_settings(environ=env_for(home, OPENAI_API_KEY="e" * 20, DEEPTUTOR_API_KEY="d" * 20))
    assert r.sources["api_key"] == "env DEEPTUTOR_API_KEY"
    assert r.settings.api_key == SecretStr("d" * 20)


def test_key_is_never_taken_from_flags_or_traits(home: Path) -> None:
    r = resolve_settings(
        environ=env_for(home, DEEPTUTOR_PROVIDER="openai"),
        traits={"api_key": SECRET},
        flags={"api_key": SECRET},
    )
    assert r.settings.api_key is None
    assert len(r.problems) == 2
    assert all(SECRET_BODY not in p for p in r.problems)


def test_file_key_of_another_provider_is_not_sent(home: Path) -> None:
    write_toml(home, f'provider = "deepseek"\napi_key = "{SECRET}"\n')
    r = resolve_settings(environ=env_for(home, DEEPTUTOR_PROVIDER="openai"))
    assert r.settings.api_key is None
    assert any("DeepSeek" in p for p in r.problems)


def test_secret_never_shown(home: Path) -> None:
    write_toml(home, f'provider = "openai"\napi_key = "{SECRET}"\ntimeout = "soon"\n')
    r = resolve_settings(environ=env_for(home))
    assert r.settings.api_key is not None
    texts = [
        repr(r.settings),
        str(r.settings),
        repr(r),
        str(describe_settings(r)),
        render_settings_markdown(r),
        r.settings.model_dump_json(),
    ]
    for text in texts:
        assert SECRET_BODY not in text
    assert "sk-…5b4a" in render_settings_markdown(r)


def test_secret_not_in_exception_text() -> None:
    with pytest.raises(ValidationError) as info:
        Settings(api_key=SECRET, timeout="x")  # type: ignore[arg-type]
    assert SECRET_BODY not in str(info.value)
    with pytest.raises(ValidationError) as info:
        Settings(api_key=SECRET, unknown=SECRET)  # type: ignore[call-arg]
    assert SECRET_BODY not in str(info.value)


def test_non_text_key_in_file_is_not_echoed(home: Path) -> None:
    write_toml(home, "api_key = 12345678901234567\n")
    r = resolve_settings(environ=env_for(home, DEEPTUTOR_PROVIDER="openai"))
    assert r.settings.api_key is None
    assert r.problems and all("12345678901234567" not in p for p in r.problems)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("sk-abcdefghijklmnopa1b2", "sk-…a1b2"),
        ("abcdefghijklmnopqrstuvwx", "…uvwx"),
        ("short-key", "set"),
        ("123456789012345", "set"),
        ("", "not set"),
    ],
)
def test_mask_secret(value: str, shown: str) -> None:
    assert mask_secret(value) == shown


def test_mask_secret_reveals_at_most_four_trailing_chars() -> None:
    masked = mask_secret(SECRET)
    assert masked.endswith("5b4a")
    assert "TOPSECRET" not in masked


# --- problems ----------------------------------------------------------------------------------


def test_bad_numbers_in_env_keep_the_default(home: Path) -> None:
    env = env_for(
        home,
        DEEPTUTOR_TIMEOUT="fast",
        DEEPTUTOR_MAX_ROUNDS="0",
        DEEPTUTOR_TEMPERATURE="9",
        DEEPTUTOR_MAX_TOKENS="2048",
    )
    r = resolve_settings(environ=env)
    assert r.settings.timeout == 60.0 and r.sources["timeout"] == "default"
    assert r.settings.max_rounds == 8
    assert r.settings.temperature is None
    assert r.settings.max_tokens == 2048
    assert len(r.problems) == 3
    assert any(p.startswith("env DEEPTUTOR_TIMEOUT") and "'fast'" in p for p in r.problems)


def test_bad_value_falls_back_to_lower_layer(home: Path) -> None:
    write_toml(home, "timeout = 30\n")
    r = resolve_settings(environ=env_for(home), flags={"timeout": "later"})
    assert r.settings.timeout == 30.0
    assert r.sources["timeout"] == "settings.toml"


def test_bad_toml_is_a_problem_not_a_crash(home: Path) -> None:
    write_toml(home, f'model = "x"\napi_key = "{SECRET}\n')
    r = resolve_settings(environ=env_for(home, DEEPTUTOR_MODEL="m"))
    assert r.settings.model == "m"
    assert len(r.problems) == 1 and "not valid TOML" in r.problems[0]
    assert SECRET_BODY not in r.problems[0]


def test_a_settings_file_that_cannot_be_looked_at_is_a_problem_not_a_crash(
    tmp_path: Path,
) -> None:
    # A name too long (or, for a learner who is not root, a folder they may not enter): the
    # file cannot even be asked whether it exists. So are bytes that are not UTF-8.
    from deeptutor_jupyter.tools.mcp.config import read_servers

    home = tmp_path / ("h" * 300)
    r = resolve_settings(environ=env_for(home))
    assert len(r.problems) == 1 and "could not be read" in r.problems[0]
    assert "could not be read" in read_servers(home).problems[0]
    write_toml(tmp_path / "latin", "")
    (tmp_path / "latin" / "settings.toml").write_bytes(b'model = "caf\xe9"\n')
    r = resolve_settings(environ=env_for(tmp_path / "latin"))
    assert len(r.problems) == 1 and "not valid TOML" in r.problems[0]
    assert "could not be read" in read_servers(tmp_path / "latin").problems[0]


def test_unknown_key_in_file_is_reported_tables_are_not(home: Path) -> None:
    write_toml(home, 'modle = "x"\n[memory]\nenabled = true\n')
    r = resolve_settings(environ=env_for(home))
    assert r.problems == ["settings.toml: unknown setting 'modle' ignored"]


def test_bool_and_language_from_env(home: Path) -> None:
    env = env_for(home, DEEPTUTOR_TRACE_IN_OUTPUTS="false", DEEPTUTOR_LANGUAGE="zh_CN.UTF-8")
    r = resolve_settings(environ=env)
    assert r.settings.trace_in_outputs is False
    assert r.settings.language == "zh"


# --- language default --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("locale_env", "language"),
    [
        ({"LANG": "zh_CN.UTF-8"}, "zh"),
        ({"LC_ALL": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
        ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),
        ({"LANG": "de_DE.UTF-8"}, "en"),
        ({}, "en"),
    ],
)
def test_language_default_from_locale(
    home: Path, locale_env: dict[str, str], language: str
) -> None:
    r = resolve_settings(environ=env_for(home, **locale_env))
    assert r.settings.language == language
    assert r.sources["language"] == "default"


# --- JupyterLab's language (the labextension reports it, server/handlers.py) -------------------


@pytest.mark.parametrize(
    ("code", "language"),
    [("zh_CN", "zh"), ("zh-TW", "zh"), ("en", "en"), ("default", "en"), ("fr_FR", "en")],
)
def test_jupyterlabs_language_beats_the_locale(home: Path, code: str, language: str) -> None:
    assert save_lab_language(home, code) == language
    r = resolve_settings(environ=env_for(home, LANG="zh_CN.UTF-8" if language == "en" else "C"))
    assert (r.settings.language, r.sources["language"]) == (language, "JupyterLab")


def test_a_language_the_learner_set_beats_jupyterlabs(home: Path) -> None:
    save_lab_language(home, "zh_CN")
    assert (
        resolve_settings(environ=env_for(home), flags={"language": "en"}).settings.language == "en"
    )
    env = env_for(home, DEEPTUTOR_LANGUAGE="en")
    assert resolve_settings(environ=env).settings.language == "en"
    write_toml(home, 'language = "en"\n')
    r = resolve_settings(environ=env_for(home))
    assert (r.settings.language, r.sources["language"]) == ("en", "settings.toml")


def test_settings_is_frozen() -> None:
    s = Settings(language="en", home=Path("/h"))
    with pytest.raises(ValidationError):
        s.model = "x"  # type: ignore[misc]


# --- writing -----------------------------------------------------------------------------------


def test_write_settings_creates_private_file(home: Path) -> None:
    path = write_settings({"provider": "claude", "model": "m", "api_key": SECRET}, home=home)
    assert path == home / "settings.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert data == {"provider": "anthropic", "model": "m", "api_key": SECRET}
    r = resolve_settings(environ=env_for(home))
    assert r.ready and r.sources["api_key"] == "settings.toml"


def test_write_settings_merges_and_preserves_other_keys(home: Path) -> None:
    write_toml(
        home,
        'model = "old"\ntimeout = 12.5\nnote = "keep \\"me\\""\n'
        '[memory]\nenabled = true\nlimits = [1, 2]\n[memory.l3]\nname = "x"\n',
    )
    os.chmod(home / "settings.toml", 0o644)
    write_settings({"model": "new", "timeout": None, "max_rounds": "4"}, home=home)
    path = home / "settings.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert data == {
        "model": "new",
        "note": 'keep "me"',
        "max_rounds": 4,
        "memory": {"enabled": True, "limits": [1, 2], "l3": {"name": "x"}},
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_write_settings_round_trips_awkward_strings(home: Path) -> None:
    value = 'a\\b "c"\n\td\x01é中'
    write_settings({"base_url": "http://x/v1", "odd key": value}, home=home)
    data = tomllib.loads((home / "settings.toml").read_text(encoding="utf-8"))
    assert data["odd key"] == value


def test_write_settings_is_atomic(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_settings({"model": "before"}, home=home)

    def boom(src: object, dst: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        write_settings({"model": "after"}, home=home)
    assert sorted(p.name for p in home.iterdir()) == ["settings.toml"]
    assert tomllib.loads((home / "settings.toml").read_text())["model"] == "before"


def test_write_settings_rejects_bad_values_without_echo(home: Path) -> None:
    with pytest.raises(SettingsFileError):
        write_settings({"provider": "nope"}, home=home)
    with pytest.raises(SettingsFileError):
        write_settings({"home": "/x"}, home=home)
    with pytest.raises(SettingsFileError) as info:
        write_settings({"api_key": SECRET, "max_rounds": "many"}, home=home)
    assert SECRET_BODY not in str(info.value)
    assert not (home / "settings.toml").exists()


def test_write_settings_refuses_to_clobber_unparsable_file(home: Path) -> None:
    path = write_toml(home, "this is = = not toml")
    with pytest.raises(SettingsFileError):
        write_settings({"model": "m"}, home=home)
    assert path.read_text() == "this is = = not toml"


def test_write_settings_uses_env_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPTUTOR_HOME", str(home))
    assert write_settings({"model": "m"}) == home / "settings.toml"


# --- showing -----------------------------------------------------------------------------------


def test_describe_rows_cover_every_field(home: Path) -> None:
    r = resolve_settings(environ=env_for(home, DEEPTUTOR_PROVIDER="ollama"))
    rows = describe_settings(r)
    assert [row[0] for row in rows] == list(Settings.model_fields)
    by_name = {name: (value, source) for name, value, source in rows}
    assert by_name["provider"] == ("ollama", "env DEEPTUTOR_PROVIDER")
    assert by_name["api_key"] == ("—", "default")
    assert by_name["trace_in_outputs"] == ("yes", "default")
    assert by_name["models"] == ("—", "default")
    more = resolve_settings(environ=env_for(home, DEEPTUTOR_MODELS=" llama3.2, qwen2.5 ,,"))
    assert dict((n, v) for n, v, _s in describe_settings(more))["models"] == "llama3.2, qwen2.5"


def test_markdown_lists_problems_missing_and_layers(home: Path) -> None:
    r = resolve_settings(environ=env_for(home, DEEPTUTOR_MAX_ROUNDS="x|y"))
    md = render_settings_markdown(r)
    assert "| Setting | Value | Source |" in md
    assert "Not ready yet" in md
    assert "x\\|y" in md  # a pipe in a value must not break the table
    for hint in ("settings.toml", "DEEPTUTOR_MODEL", "c.TutorMagics", "%tutor --model"):
        assert hint in md


def test_ready_resolved_settings_constructed_directly() -> None:
    s = Settings(
        provider="openai", model="m", base_url="u", api_key=SecretStr("k"), home=Path("/h")
    )
    assert ResolvedSettings(s, {}, []).ready


@pytest.mark.parametrize("language", ["en", "zh"])
def test_setup_instructions(home: Path, language: str) -> None:
    md = setup_instructions_markdown(language, home=home)
    for needle in (
        "OPENAI_API_KEY",
        "DEEPSEEK_API_KEY",
        "ANTHROPIC_API_KEY",
        "ollama serve",
        "ollama pull",
        'provider = "ollama"',
        "http://localhost:11434/v1",
        'provider = "custom"',
        "base_url",
        "ipython_config.py",
        "%tutor --provider",
        str(home / "settings.toml"),
    ):
        assert needle in md
    assert ("为 DeepTutor" in md) == (language == "zh")


def test_import_stays_light() -> None:
    code = (
        "import sys, deeptutor_jupyter.config\n"
        "bad = [m for m in ('httpx', 'IPython', 'ipywidgets') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_timeouts_and_retry_wait_are_settings_shown_in_config() -> None:
    from deeptutor_jupyter.config import render_settings_markdown, resolve_settings

    env = {
        "DEEPTUTOR_IDLE_TIMEOUT": "5",
        "DEEPTUTOR_TURN_DEADLINE": "300",
        "DEEPTUTOR_MAX_RETRY_WAIT": "0",
    }
    resolved = resolve_settings(environ=env)
    s = resolved.settings
    assert (s.idle_timeout, s.turn_deadline, s.max_retry_wait) == (5.0, 300.0, 0.0)
    shown = render_settings_markdown(resolved)
    for name in ("idle_timeout", "turn_deadline", "max_retry_wait"):
        assert f"| `{name}` |" in shown
    defaults = resolve_settings(environ={}).settings
    assert (defaults.idle_timeout, defaults.turn_deadline, defaults.max_retry_wait) == (
        120.0,
        900.0,
        60.0,
    )


def test_saving_keeps_the_learners_comments_and_layout(home: Path) -> None:
    path = home / "settings.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '# my notes: the school\'s gateway\nbase_url = "http://gw/v1"  # do not change\n\n'
        'model = "old"\n',
        encoding="utf-8",
    )
    write_settings({"model": "new", "timeout": 30}, home=home)
    text = path.read_text(encoding="utf-8")
    assert "# my notes: the school's gateway" in text and "# do not change" in text
    assert 'model = "new"' in text and "timeout = 30" in text
    assert text.index("base_url") < text.index("model")  # the learner's order is kept
    write_settings({"timeout": None}, home=home)
    assert "timeout" not in path.read_text(encoding="utf-8")


def test_the_tool_call_cap_is_a_setting_that_reaches_the_turn(home: Path) -> None:
    from deeptutor_jupyter.runtime.ask import profile_of

    assert resolve_settings(environ=env_for(home)).settings.max_tool_calls == 32
    r = resolve_settings(environ=env_for(home, DEEPTUTOR_MAX_TOOL_CALLS="5"))
    assert profile_of(r.settings).max_tool_calls == 5
    bad = resolve_settings(environ=env_for(home, DEEPTUTOR_MAX_TOOL_CALLS="0"))
    assert bad.settings.max_tool_calls == 32 and bad.problems


def test_jupyterlabs_language_makes_a_new_home_private(tmp_path: Path) -> None:
    """JupyterLab reports its language before any kernel ran: the home it creates is the
    learner's alone, as a kernel would make it (no "was readable by other users" later)."""
    import stat

    home = tmp_path / "new-home"
    save_lab_language(home, "zh_CN")
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "jupyterlab-language").stat().st_mode) == 0o600
