"""Settings for the tutor, and where each one came from.

Layers, lowest first: defaults < ``$DEEPTUTOR_HOME/settings.toml`` < environment < traitlets
(``c.TutorMagics.*``) < magic flags. A bad value in any layer becomes a readable problem line and
that layer is skipped for that field, so a typo never stops a learner from reaching the tutor.

The API key is special: it is read only from ``DEEPTUTOR_API_KEY``, the provider's own key
variable, or ``settings.toml`` -- never from a flag or a notebook cell, because whatever is typed
in a cell ends up in the saved notebook. It is held as a ``SecretStr`` and shown only masked.

This module is imported at extension load and by the server side, so it stays free of httpx,
IPython and ipywidgets.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, SecretStr, ValidationError, field_validator

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.providers.specs import PROVIDERS, ProviderSpec, find_provider
from deeptutor_jupyter.redact import register

__all__ = [
    "HubService",
    "ResolvedSettings",
    "Settings",
    "SettingsFileError",
    "describe_settings",
    "hub_service",
    "mask_secret",
    "render_settings_markdown",
    "resolve_settings",
    "settings_path",
    "setup_instructions_markdown",
    "write_settings",
]

Language = Literal["en", "zh"]
# How code answers of quizzes are graded (docs/learning.md#the-code-sandbox): "auto" runs the
# model's tests in bubblewrap, else under Landlock and seccomp, else not at all; "bwrap" and
# "landlock" only in that one; "refuse" never runs them; "unsafe" runs them with resource limits
# and an audit hook only (no isolation).
SandboxMode = Literal["auto", "bwrap", "landlock", "refuse", "unsafe"]

HOME_ENV = "DEEPTUTOR_HOME"
KEY_ENV = "DEEPTUTOR_API_KEY"
SETTINGS_FILE = "settings.toml"
# JupyterLab's display language, as the labextension last reported it (server/handlers.py).
LAB_LANGUAGE_FILE = "jupyterlab-language"
LAB_LANGUAGE_SOURCE = "JupyterLab"
CUSTOM_PROVIDER = "custom"
HUB_PROVIDER = "hub"
HUB_URL_ENV = "DEEPTUTOR_HUB_SERVICE_URL"
HUB_MODELS_ENV = "DEEPTUTOR_HUB_MODELS"  # the course's models, comma-separated (hub/configure.py)
HUB_TOKEN_ENV = "JUPYTERHUB_API_TOKEN"
# The token configure() mints for the course service alone (docs/hub.md); preferred to the
# server's own token, which opens the student's server.
HUB_SERVICE_TOKEN_ENV = "DEEPTUTOR_HUB_TOKEN"
HUB_TOKEN_ENVS = (HUB_SERVICE_TOKEN_ENV, HUB_TOKEN_ENV)  # the first one set is sent
HUB_REFUSED = "provider hub: the hub token is sent only to the hub's service URL"
# The folder a jupyter_server with our extension serves, set by the extension in its own
# environment, which the kernels it starts inherit: panel attachments are read under it only.
SERVER_ROOT_ENV = "DEEPTUTOR_SERVER_ROOT"
_NOT_SET = "—"


def _default_home(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    raw = env.get(HOME_ENV, "").strip()
    return Path(raw or "~/.deeptutor").expanduser()


def _default_language(environ: Mapping[str, str] | None = None) -> Language:
    """Chinese when the locale says so; POSIX order: LC_ALL wins over LC_MESSAGES over LANG."""
    env = os.environ if environ is None else environ
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(var, "").strip()
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def lab_language(code: str) -> Language:
    """Our language for a JupyterLab locale code ("zh_CN", "zh-TW", "en", "default", "fr_FR"):
    Chinese for any Chinese, else English (the forms have no other catalog)."""
    return "zh" if code.strip().lower().startswith("zh") else "en"


def save_lab_language(home: Path, code: str) -> Language:
    """Remember JupyterLab's language where every kernel of this home reads it."""
    from deeptutor_jupyter._files import atomic_write_text, ensure_private_dir

    language = lab_language(code)
    if not home.exists():  # private from the start, like every home (an existing one: the
        ensure_private_dir(home)  # kernel tightens it and says so)
    atomic_write_text(home / LAB_LANGUAGE_FILE, language + "\n")
    return language


def _saved_lab_language(home: Path) -> str | None:
    try:
        return (home / LAB_LANGUAGE_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None  # no JupyterLab has reported (a terminal, an old server): the locale decides


class Settings(LazyModel):
    """The effective settings of one turn. Build them with :func:`resolve_settings`."""

    # hide_input_in_errors keeps a mistyped key out of ValidationError text.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    provider: str | None = None
    model: str | None = None
    # More models of the same provider the Tutor panel offers beside ``model`` (same key and
    # URL); on a hub the course's models are offered instead (docs/sidebar.md#model-and-knowledge).
    models: tuple[str, ...] = ()
    base_url: str | None = None
    api_key: SecretStr | None = None
    timeout: float = Field(60.0, gt=0)
    connect_timeout: float = Field(10.0, gt=0)
    # Seconds a stream may send nothing to show (keep-alive comments do not count).
    idle_timeout: float = Field(120.0, gt=0)
    # Seconds of model and tool time one turn may use (time waiting for your answer is free).
    turn_deadline: float = Field(900.0, gt=0)
    # The longest Retry-After the tutor waits for; a longer one ends the turn with the 429 card.
    max_retry_wait: float = Field(60.0, ge=0)
    max_rounds: int = Field(8, ge=1)
    # Tool calls one model message may ask for; beyond it the model gets one refusal.
    max_tool_calls: int = Field(32, ge=1)
    # Tokens (estimated at 4 characters each) the earlier conversation may take in a request;
    # beyond it the older turns are compacted into a summary (runtime/compaction.py).
    context_budget: int = Field(24000, ge=1000)
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    language: Language = Field(default_factory=_default_language)
    home: Path = Field(default_factory=_default_home)
    trace_in_outputs: bool = True
    # How long an ask_user question waits for an answer before it times out.
    ask_timeout_hours: float = Field(24.0, gt=0)
    # Keep L2/L3 memory current in the background after turns (docs/memory.md), with the
    # configured model, once ``consolidate_every`` new traces have accumulated.
    auto_consolidate: bool = True
    consolidate_every: int = Field(5, ge=1)
    # On a JupyterHub with a course service: send the course your mastery per objective
    # (numbers only: probability and graded answers, never answers). False keeps it here.
    share_progress: bool = True
    # Where the tests of code questions run; "unsafe" is for a single-user laptop only.
    sandbox: SandboxMode = "auto"

    @field_validator("provider", mode="before")
    @classmethod
    def _canonical_provider(cls, value: Any) -> Any:
        if isinstance(value, str):
            spec = find_provider(value)
            if spec is None:
                raise ValueError(f"unknown provider {value.strip()!r}; known: {_known_names()}")
            return spec.name
        return value

    @field_validator("models", mode="before")
    @classmethod
    def _model_list(cls, value: Any) -> Any:
        # An environment variable or a flag gives them comma-separated.
        if isinstance(value, str):
            value = value.split(",")
        if isinstance(value, list | tuple):
            names = [v.strip() if isinstance(v, str) else v for v in value]
            return tuple(dict.fromkeys(n for n in names if n != ""))
        return value

    @field_validator("language", mode="before")
    @classmethod
    def _short_language(cls, value: Any) -> Any:
        # Accept locale spellings such as "zh_CN.UTF-8" or "en-US".
        if isinstance(value, str):
            return value.strip().lower()[:2]
        return value

    @field_validator("home", mode="after")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("model", "base_url", mode="after")
    @classmethod
    def _no_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            return None
        return value.strip() if value is not None else None


FIELDS: tuple[str, ...] = tuple(Settings.model_fields)
# Fields that have an env variable of the plain DEEPTUTOR_<NAME> form.
_ENV_FIELDS = tuple(f for f in FIELDS if f not in ("api_key", "home"))


def _known_names() -> str:
    return ", ".join(spec.name for spec in PROVIDERS)


def _env_var(name: str) -> str:
    return f"DEEPTUTOR_{name.upper()}"


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class ResolvedSettings:
    """Settings plus, for each field, the layer it came from, and what went wrong on the way."""

    settings: Settings
    sources: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def spec(self) -> ProviderSpec | None:
        p = self.settings.provider
        return find_provider(p) if p else None

    @property
    def ready(self) -> bool:
        """True when a model can be called with these settings."""
        return not self.missing()

    def missing(self) -> list[str]:
        """What is still needed before the first turn, worded for a learner."""
        s, spec = self.settings, self.spec
        if spec is None:
            return [
                "a provider (OpenAI, DeepSeek, Anthropic, Ollama on this machine, "
                "or any OpenAI-compatible URL)"
            ]
        out: list[str] = []
        if not s.model:
            out.append(f"a model name for {spec.label}")
        if not s.base_url:
            out.append(f"the base URL of your {spec.label} endpoint")
        if spec.needs_key and not _secret_text(s.api_key):
            refused = [p for p in self.problems if p.startswith(HUB_REFUSED)]
            envs = " or ".join((*spec.key_envs, KEY_ENV))
            out += refused or [f"an API key for {spec.label} (set {envs})"]
        return out


def _secret_text(value: SecretStr | None) -> str:
    return value.get_secret_value().strip() if value is not None else ""


def settings_path(home: Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """``$DEEPTUTOR_HOME/settings.toml``; ``home`` wins over the environment."""
    base = Path(home).expanduser() if home is not None else _default_home(environ)
    return base / SETTINGS_FILE


# --- reading the layers -------------------------------------------------------------------------


class _Layers:
    """Accumulates values field by field; a later ``offer`` for a field wins over an earlier one."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.sources: dict[str, str] = {name: "default" for name in FIELDS}
        self.problems: list[str] = []
        self.rejected_provider = False

    def offer(self, name: str, raw: Any, source: str) -> bool:
        try:
            value = getattr(Settings.model_validate({name: raw}), name)
        except ValidationError as exc:
            self.problems.append(_problem(name, raw, source, exc))
            if name == "provider":
                self.rejected_provider = True
            return False
        self.values[name] = value
        self.sources[name] = source
        return True


def _problem(name: str, raw: Any, source: str, exc: ValidationError) -> str:
    reason = "; ".join(str(e["msg"]) for e in exc.errors())
    shown = "" if name == "api_key" else f" {raw!r}"
    return f"{source}: ignored {name}{shown} ({reason})"


def _given(value: Any) -> bool:
    """None means "not given"; so does a blank string (an empty Unicode trait, an empty env var)."""
    return value is not None and not (isinstance(value, str) and not value.strip())


def _read_toml(path: Path, problems: list[str]) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            # Only where there is a file: ~2.5 ms a first request need not wait for. Opened
            # first, not asked ``exists()``, which raises for a path it cannot look at.
            import tomllib

            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        problems.append(f"{path} could not be read and was skipped: {exc.strerror}")
    except ValueError as exc:
        # tomllib.TOMLDecodeError, or bytes that are not UTF-8: the message names a line and
        # column or a byte's position, never the content.
        problems.append(f"{path} is not valid TOML and was skipped: {exc}")
    return {}


def _offer_file(layers: _Layers, data: Mapping[str, Any]) -> None:
    for key, raw in data.items():
        if isinstance(raw, dict):
            continue  # tables belong to other parts of the tutor
        if key == "home":
            layers.problems.append(
                f"settings.toml: ignored home (the file lives in the home; set {HOME_ENV})"
            )
        elif key == "api_key":
            continue  # the key has its own precedence, see _resolve_key
        elif key not in FIELDS:
            layers.problems.append(f"settings.toml: unknown setting {key!r} ignored")
        elif _given(raw):
            layers.offer(key, raw, SETTINGS_FILE)


def _offer_mapping(layers: _Layers, values: Mapping[str, Any], label: Any) -> None:
    # Unknown names are the magics' own options, not settings: they are skipped quietly.
    for name, raw in values.items():
        if name not in FIELDS or not _given(raw):
            continue
        if name == "api_key":
            layers.problems.append(
                f"{label(name)}: ignored api_key; a key typed in a notebook or config is easy to "
                f"leak. Set {KEY_ENV} or use the setup card, which writes settings.toml."
            )
            continue
        layers.offer(name, raw, label(name))


@dataclass(frozen=True)
class HubService:
    """The course service a JupyterHub spawner announced to this kernel (deeptutor_jupyter/hub)."""

    url: str
    name: str
    model: str | None
    models: tuple[str, ...] = ()  # every model the course offers (the gateway's allow-list)


def hub_token(environ: Mapping[str, str]) -> str:
    """The token the kernel sends the course service: the service-only one when the hub gave
    it (``DEEPTUTOR_HUB_TOKEN``), else the server's ``JUPYTERHUB_API_TOKEN``."""
    for var in HUB_TOKEN_ENVS:
        token = environ.get(var, "").strip()
        if token:
            return token
    return ""


def hub_service(environ: Mapping[str, str] | None = None) -> HubService | None:
    """The course's service when the hub set ``DEEPTUTOR_HUB_SERVICE_URL`` and a hub token exists.

    ``deeptutor_jupyter.hub.configure`` puts the URL, the service name and the default model in
    ``c.Spawner.environment``; the key the kernel sends is the student's ``JUPYTERHUB_API_TOKEN``.
    """
    env = os.environ if environ is None else environ
    url = env.get(HUB_URL_ENV, "").strip()
    if not url or not hub_token(env):
        return None
    name = env.get("DEEPTUTOR_HUB_SERVICE_NAME", "").strip() or "deeptutor"
    model = env.get("DEEPTUTOR_HUB_MODEL", "").strip() or None
    offered = [m.strip() for m in env.get(HUB_MODELS_ENV, "").split(",") if m.strip()]
    models = tuple(dict.fromkeys([*([model] if model else []), *offered]))
    return HubService(url=url.rstrip("/"), name=name, model=model, models=models)


def _resolve_home(
    environ: Mapping[str, str], traits: Mapping[str, Any], flags: Mapping[str, Any]
) -> _Layers:
    # The home decides which settings.toml is read, so it is settled before any other field.
    layers = _Layers()
    layers.offer("home", _default_home(environ), "default")
    if _given(environ.get(HOME_ENV)):
        layers.offer("home", environ[HOME_ENV], f"env {HOME_ENV}")
    if _given(traits.get("home")):
        layers.offer("home", traits["home"], "c.TutorMagics.home")
    if _given(flags.get("home")):
        layers.offer("home", flags["home"], _flag("home"))
    return layers


def _infer_provider(layers: _Layers, environ: Mapping[str, str]) -> None:
    if "provider" in layers.values or layers.rejected_provider:
        return  # a provider was named, even if mistyped: guessing another would surprise
    if "base_url" in layers.values:
        layers.offer("provider", CUSTOM_PROVIDER, f"inferred from {layers.sources['base_url']}")
        return
    service = hub_service(environ)
    if service is not None:
        # Nothing else was configured: the course's service is the model (docs/hub.md).
        source = f"hub service {service.name}"
        layers.offer("provider", HUB_PROVIDER, source)
        layers.offer("base_url", service.url, source)
        if "model" not in layers.values and service.model:
            layers.offer("model", service.model, source)
        return
    for spec in PROVIDERS:
        if spec.name == HUB_PROVIDER:
            continue  # a hub token alone does not mean this hub runs the course service
        for var in spec.key_envs:
            if environ.get(var, "").strip():
                layers.offer("provider", spec.name, f"inferred from env {var}")
                return


def _resolve_key(layers: _Layers, environ: Mapping[str, str], file_data: Mapping[str, Any]) -> None:
    spec = find_provider(layers.values["provider"]) if "provider" in layers.values else None
    if spec is not None and spec.name == HUB_PROVIDER:
        # Only the hub's own token goes to the course service, never a personal provider key.
        token = hub_token(environ)
        service = hub_service(environ)
        if service is not None:
            # provider = "hub" named without an address: the course service's, and its model.
            source = f"hub service {service.name}"
            if "base_url" not in layers.values:
                layers.offer("base_url", service.url, source)
            if "model" not in layers.values and service.model:
                layers.offer("model", service.model, source)
        problem = _hub_url_problem(layers.values.get("base_url"), environ) if token else None
        if problem:
            layers.problems.append(problem)
        elif token:
            var = HUB_SERVICE_TOKEN_ENV if environ.get(HUB_SERVICE_TOKEN_ENV) else HUB_TOKEN_ENV
            layers.offer("api_key", token, f"env {var}")
        return
    candidates = [(KEY_ENV, f"env {KEY_ENV}")]
    candidates += [(var, f"env {var}") for var in (spec.key_envs if spec else ())]
    for var, source in candidates:
        if environ.get(var, "").strip():
            layers.offer("api_key", environ[var].strip(), source)
            return
    raw = file_data.get("api_key")
    if not _given(raw):
        return
    file_provider = file_data.get("provider")
    owner = find_provider(file_provider) if isinstance(file_provider, str) else None
    if owner is not None and spec is not None and owner.name != spec.name:
        # Sending one vendor's key to another leaks it; better to ask again.
        layers.problems.append(
            f"settings.toml holds a key for {owner.label}; it is not sent to {spec.label}"
        )
        return
    layers.offer("api_key", raw, SETTINGS_FILE)


def _hub_url_problem(url: Any, environ: Mapping[str, str]) -> str | None:
    """Why the hub token may not be sent to ``url``, or None when ``url`` is the hub's service.

    The token acts as the student on the hub (the server's own token opens their server), so a
    ``base_url`` a learner or a notebook set must never receive it.
    """
    service = hub_service(environ)
    if service is not None and isinstance(url, str) and url.strip().rstrip("/") == service.url:
        return None
    where = f"the course's service is {service.url}" if service else f"{HUB_URL_ENV} is not set"
    return (
        f"{HUB_REFUSED}, and base_url ({url or 'not set'}) is not it ({where}). The token was "
        "not used: remove base_url to use the course's model, or choose another provider."
    )


def _fill_from_spec(layers: _Layers) -> None:
    if "provider" not in layers.values:
        return
    spec = find_provider(layers.values["provider"])
    if spec is None:
        return
    for name, default in (("model", spec.default_model), ("base_url", spec.default_base_url)):
        if name not in layers.values and default:
            layers.offer(name, default, "provider default")


def resolve_settings(
    *,
    traits: Mapping[str, Any] | None = None,
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ResolvedSettings:
    """Merge every layer into effective settings; never raises for a bad value in a layer."""
    env = os.environ if environ is None else environ
    traits, flags = traits or {}, flags or {}
    layers = _resolve_home(env, traits, flags)
    layers.offer("language", _default_language(env), "default")
    # JupyterLab's language beats the process locale; any language the learner set beats it.
    from_lab = _saved_lab_language(layers.values["home"])
    if from_lab is not None:
        layers.offer("language", from_lab, LAB_LANGUAGE_SOURCE)
    path = settings_path(layers.values["home"])
    file_data = _read_toml(path, layers.problems)
    _offer_file(layers, file_data)
    for name in _ENV_FIELDS:
        if _given(env.get(_env_var(name))):
            layers.offer(name, env[_env_var(name)].strip(), f"env {_env_var(name)}")
    _offer_mapping(layers, traits, lambda n: f"c.TutorMagics.{n}")
    _offer_mapping(layers, flags, _flag)
    _infer_provider(layers, env)
    _fill_from_spec(layers)
    _resolve_key(layers, env, file_data)
    settings = Settings(**layers.values)
    # Known to this process from now on: nothing it stores or shows may hold them (redact.py).
    register(_secret_text(settings.api_key), *(env.get(v, "") for v in HUB_TOKEN_ENVS))
    return ResolvedSettings(settings, dict(layers.sources), list(layers.problems))


# --- showing them -------------------------------------------------------------------------------


def mask_secret(value: str) -> str:
    """Which key is in use, without revealing it: ``sk-…a1b2`` for long keys, else "set"."""
    value = value.strip()
    if not value:
        return "not set"
    if len(value) < 16:
        return "set"  # four characters of a short key are too large a share of it
    prefix = re.match(r"[A-Za-z]{2,4}-", value)
    return f"{prefix.group(0) if prefix else ''}…{value[-4:]}"


def _display(name: str, value: Any) -> str:
    if value is None:
        return _NOT_SET
    if isinstance(value, SecretStr):
        return mask_secret(value.get_secret_value())
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, tuple):
        return ", ".join(map(str, value)) or _NOT_SET
    return str(value)


def describe_settings(resolved: ResolvedSettings) -> list[tuple[str, str, str]]:
    """(name, masked value, source) for every field, in declaration order."""
    s = resolved.settings
    return [(n, _display(n, getattr(s, n)), resolved.sources.get(n, "default")) for n in FIELDS]


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_settings_markdown(resolved: ResolvedSettings) -> str:
    """The ``%tutor config`` report: effective values, their sources, problems, how to change."""
    lines = ["**DeepTutor settings**", "", "| Setting | Value | Source |", "|---|---|---|"]
    for name, value, source in describe_settings(resolved):
        lines.append(f"| `{name}` | {_cell(value)} | {_cell(source)} |")
    lines.append("")
    if resolved.settings.provider == HUB_PROVIDER:
        lines += [_hub_line(resolved), ""]
    if resolved.ready:
        lines.append("Ready: a model can be called.")
    else:
        lines.append("Not ready yet. Missing: " + "; ".join(resolved.missing()) + ".")
    if resolved.problems:
        lines += ["", "**Problems**", ""]
        lines += [f"- {_cell(p)}" for p in resolved.problems]
    path = settings_path(resolved.settings.home)
    lines += [
        "",
        "**How to change a setting** (each layer overrides the ones above it)",
        "",
        f"1. settings file: `{path}` (the setup card writes it)",
        "2. environment: `DEEPTUTOR_PROVIDER`, `DEEPTUTOR_MODEL`, `DEEPTUTOR_BASE_URL`, "
        f"`{KEY_ENV}` or the provider's own key variable, `DEEPTUTOR_<SETTING>` for the others",
        '3. `ipython_config.py`: `c.TutorMagics.model = "..."`',
        "4. for one cell: `%tutor --model NAME ...`",
    ]
    return "\n".join(lines) + "\n"


def _hub_line(resolved: ResolvedSettings) -> str:
    source = resolved.sources.get("base_url", "")
    name = source.removeprefix("hub service ") if source.startswith("hub service ") else "hub"
    return (
        f"Model provided by your course (hub service `{name}` at {resolved.settings.base_url}); "
        "your hub login is the key, and your instructor sets the daily budget."
    )


# --- writing settings.toml ----------------------------------------------------------------------


class SettingsFileError(DeepTutorError, ValueError):
    code = "settings"

    """settings.toml could not be updated; the message names the file, never its content."""


def _validated_for_file(values: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, raw in values.items():
        if key == "home":
            raise SettingsFileError("home cannot be stored in settings.toml; set DEEPTUTOR_HOME")
        if raw is None or key not in FIELDS:
            out[key] = raw
            continue
        try:
            value = getattr(Settings.model_validate({key: raw}), key)
        except ValidationError as exc:
            reason = "; ".join(str(e["msg"]) for e in exc.errors())
            raise SettingsFileError(f"{key}: {reason}") from None
        if isinstance(value, SecretStr):
            value = value.get_secret_value().strip()
        out[key] = value
    return out


def write_settings(values: Mapping[str, Any], *, home: Path | None = None) -> Path:
    """Merge ``values`` into settings.toml atomically and return its path.

    A value of None removes that key. The file is written with mode 0600 because it may hold a
    key; the temp file + fsync + ``os.replace`` dance means a crash leaves the old file or the new
    one, never half of either.
    """
    path = settings_path(home)
    updates = _validated_for_file(values)
    problems: list[str] = []
    _read_toml(path, problems)
    if problems:
        # Overwriting a file we could not parse would silently drop what the learner wrote.
        raise SettingsFileError(f"{path} is not valid TOML; fix or remove it, then save again")
    text = _merged_toml(path, updates)
    _atomic_write(path, text)
    return path


SETTINGS_HEADER = "DeepTutor settings. Written by the setup card; safe to edit."


def _merged_toml(path: Path, updates: Mapping[str, Any]) -> str:
    """The file with ``updates`` applied in place: the learner's comments, order and layout
    survive (tomlkit edits the document rather than rewriting it)."""
    import tomlkit  # only when settings are saved

    try:
        document = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else None
    except OSError:
        document = None
    if document is None:
        document = tomlkit.document()
        document.add(
            tomlkit.comment("DeepTutor settings. Written by the setup card; safe to edit.")
        )
    for key, value in updates.items():
        if value is None:
            document.pop(key, None)
            continue
        try:
            document[key] = value.as_posix() if isinstance(value, Path) else value
        except (TypeError, ValueError) as exc:
            raise SettingsFileError(f"cannot write {key!r} to TOML: {exc}") from None
    return tomlkit.dumps(document)


def _atomic_write(path: Path, text: str) -> None:
    from deeptutor_jupyter._files import atomic_write_text, ensure_private_dir

    ensure_private_dir(path.parent)
    atomic_write_text(path, text)  # the temporary file is 0600 from its creation


def setup_instructions_markdown(language: str = "en", *, home: Path | None = None) -> str:
    """Exact steps for a learner with no model configured, in English or Chinese."""
    from deeptutor_jupyter.setup_help import instructions

    return instructions(language, settings_path(home))
