"""The card ``%tutor`` shows when no model is configured: pick a provider, save settings.toml.

The key is typed into a ``Password`` widget, whose value is still widget state and therefore ends
up in a saved notebook's widget metadata; the card clears it as soon as it is written to the
0600 settings file, and never echoes it in any message.
"""

from __future__ import annotations

import html
import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from deeptutor_jupyter.config import (
    KEY_ENV,
    ResolvedSettings,
    SettingsFileError,
    resolve_settings,
    settings_path,
    setup_instructions_markdown,
    write_settings,
)
from deeptutor_jupyter.kernel.widgets.fallback import TextFallback
from deeptutor_jupyter.providers.specs import ProviderSpec, api_key_from_env, find_provider

# The choices the card offers; any other provider is configured by hand (see the instructions).
CHOICES: tuple[str, ...] = ("openai", "deepseek", "anthropic", "ollama", "openai-compatible")

_STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "title": "Connect DeepTutor to a model",
        "missing": "Still needed:",
        "provider": "Provider",
        "model": "Model",
        "base_url": "Base URL",
        "api_key": "API key",
        "api_key_optional": "API key (optional)",
        "key_placeholder": "paste your key; it is stored only in settings.toml",
        "key_from_env": "already set in {var}; leave empty to use it",
        "key_in_file": "already saved; leave empty to keep it",
        "save": "Save",
        "saved": "Saved to {path}. Run your %tutor cell again.",
        "need_model": "Enter a model name.",
        "need_base_url": "Enter the base URL of your server, e.g. http://localhost:8000/v1.",
        "need_key": "Enter an API key for {label}, or set {var} and restart the kernel.",
        "save_failed": "Could not save: {reason}",
        "instructions": "Set it up by hand instead",
        "label_openai": "OpenAI",
        "label_deepseek": "DeepSeek",
        "label_anthropic": "Anthropic",
        "label_ollama": "Ollama (local)",
        "label_openai-compatible": "OpenAI-compatible URL",
    },
    "zh": {
        "title": "为 DeepTutor 连接一个模型",
        "missing": "还需要：",
        "provider": "服务商",
        "model": "模型",
        "base_url": "地址",
        "api_key": "API 密钥",
        "api_key_optional": "API 密钥（可选）",
        "key_placeholder": "粘贴密钥；只会保存在 settings.toml 中",
        "key_from_env": "已在 {var} 中设置；留空即使用它",
        "key_in_file": "已保存；留空即保留",
        "save": "保存",
        "saved": "已保存到 {path}。请重新运行 %tutor 单元格。",
        "need_model": "请输入模型名称。",
        "need_base_url": "请输入服务地址，例如 http://localhost:8000/v1。",
        "need_key": "请输入 {label} 的 API 密钥，或设置 {var} 后重启内核。",
        "save_failed": "保存失败：{reason}",
        "instructions": "手动设置",
        "label_openai": "OpenAI",
        "label_deepseek": "DeepSeek",
        "label_anthropic": "Anthropic",
        "label_ollama": "Ollama（本机）",
        "label_openai-compatible": "OpenAI 兼容地址",
    },
}


def _spec(name: str) -> ProviderSpec:
    spec = find_provider(name)
    if spec is None:  # pragma: no cover - CHOICES are all in the table
        raise LookupError(name)
    return spec


def _markdown_output(text: str) -> widgets.Output:
    out = widgets.Output()
    # Set outputs directly: append_display_data would need a running InteractiveShell.
    out.outputs = (
        {
            "output_type": "display_data",
            "data": {"text/markdown": text, "text/plain": text},
            "metadata": {},
        },
    )
    return out


def _show(widget: widgets.DOMWidget, visible: bool) -> None:
    widget.layout.display = None if visible else "none"


class SetupCard(TextFallback, widgets.VBox):  # type: ignore[misc]
    """Asks for provider, model, base URL and key, and writes them to settings.toml."""

    def __init__(
        self,
        resolved: ResolvedSettings | None = None,
        *,
        language: str | None = None,
        home: Path | None = None,
        environ: Mapping[str, str] | None = None,
        on_saved: Callable[[Path], None] | None = None,
        **kwargs: Any,
    ) -> None:
        self._environ = os.environ if environ is None else environ
        resolved = resolved or resolve_settings(environ=self._environ)
        self.language = language or resolved.settings.language
        self.home = Path(home) if home is not None else resolved.settings.home
        self.on_saved = on_saved
        self.saved_path: Path | None = None
        s = self._strings

        start = resolved.settings.provider if resolved.settings.provider in CHOICES else "openai"
        self.provider = widgets.Dropdown(
            options=[(s[f"label_{name}"], name) for name in CHOICES],
            value=start,
            description=s["provider"],
        )
        self.model = widgets.Text(description=s["model"])
        self.base_url = widgets.Text(description=s["base_url"])
        self.api_key = widgets.Password(description=s["api_key"])
        self.save_button = widgets.Button(description=s["save"], button_style="primary")
        self.status = widgets.HTML()
        self.instructions = widgets.Accordion(
            children=[_markdown_output(setup_instructions_markdown(self.language, home=self.home))],
            titles=(s["instructions"],),
            selected_index=None,
        )
        self._fill_for(start)
        if resolved.settings.provider == start and resolved.settings.model:
            self.model.value = resolved.settings.model

        self.provider.observe(self._on_provider, names="value")
        self.save_button.on_click(self._on_save)
        self.missing = resolved.missing()
        header = widgets.HTML(self._header_html(self.missing))
        fields = [self.provider, self.model, self.base_url, self.api_key]
        children = [header, *fields, self.save_button, self.status, self.instructions]
        super().__init__(children=children, **kwargs)
        self.add_class("dt-setup-card")

    def fallback_markdown(self) -> str:
        """The card in words: what is missing and the steps to set it up by hand."""
        s = self._strings
        lines = [f"**{s['title']}**", ""]
        if self.missing:
            lines += [s["missing"], *(f"- {m}" for m in self.missing), ""]
        lines.append(setup_instructions_markdown(self.language, home=self.home))
        return "\n".join(lines).rstrip() + "\n"

    @property
    def _strings(self) -> dict[str, str]:
        return _STRINGS.get(self.language, _STRINGS["en"])

    def _header_html(self, missing: list[str]) -> str:
        s = self._strings
        items = "".join(f"<li>{html.escape(m)}</li>" for m in missing)
        body = f"<div>{html.escape(s['missing'])}<ul>{items}</ul></div>" if items else ""
        return f"<h4>{html.escape(s['title'])}</h4>{body}"

    def _on_provider(self, change: Mapping[str, Any]) -> None:
        self._fill_for(str(change["new"]))

    def _fill_for(self, name: str) -> None:
        spec, s = _spec(name), self._strings
        self.model.value = spec.default_model or ""
        self.base_url.value = spec.default_base_url or ""
        # Hosted providers have one fixed URL; only local and custom servers need one typed.
        _show(self.base_url, self._wants_base_url(spec))
        _show(self.api_key, not spec.is_local)
        self.api_key.description = s["api_key"] if spec.needs_key else s["api_key_optional"]
        self.api_key.placeholder = self._key_placeholder(spec)
        self.status.value = ""

    @staticmethod
    def _wants_base_url(spec: ProviderSpec) -> bool:
        return spec.is_local or spec.default_base_url is None

    def _key_placeholder(self, spec: ProviderSpec) -> str:
        s = self._strings
        var = self._env_key_var(spec)
        if var:
            return s["key_from_env"].format(var=var)
        if self._file_has_key_for(spec):
            return s["key_in_file"]
        return s["key_placeholder"]

    def _env_key_var(self, spec: ProviderSpec) -> str | None:
        if self._environ.get(KEY_ENV, "").strip():
            return KEY_ENV
        if api_key_from_env(spec, self._environ) is None:
            return None
        return next(v for v in spec.key_envs if self._environ.get(v, "").strip())

    def _file_data(self) -> dict[str, Any]:
        try:
            with settings_path(self.home).open("rb") as fh:
                return tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError):
            return {}

    def _file_has_key_for(self, spec: ProviderSpec) -> bool:
        data = self._file_data()
        owner = find_provider(str(data.get("provider", "")))
        return bool(str(data.get("api_key", "")).strip()) and owner == spec

    def _on_save(self, _button: widgets.Button | None = None) -> None:
        spec, s = _spec(self.provider.value), self._strings
        model, base_url = self.model.value.strip(), self.base_url.value.strip()
        key = "" if spec.is_local else self.api_key.value.strip()
        if not model:
            return self._say(s["need_model"], error=True)
        if self._wants_base_url(spec) and not base_url:
            return self._say(s["need_base_url"], error=True)
        has_key = key or self._env_key_var(spec) or self._file_has_key_for(spec)
        if spec.needs_key and not has_key:
            var = spec.key_envs[0] if spec.key_envs else KEY_ENV
            return self._say(s["need_key"].format(label=spec.label, var=var), error=True)
        values: dict[str, Any] = {
            "provider": spec.name,
            "model": model,
            # A stale URL from an earlier custom setup would send this provider's key elsewhere.
            "base_url": base_url if self._wants_base_url(spec) else None,
        }
        if key:
            values["api_key"] = key
        elif not self._file_has_key_for(spec):
            values["api_key"] = None  # a key saved for another provider must not follow along
        self._write(values)

    def _write(self, values: dict[str, Any]) -> None:
        s = self._strings
        try:
            path = write_settings(values, home=self.home)
        except SettingsFileError as exc:
            return self._say(s["save_failed"].format(reason=exc), error=True)
        except OSError as exc:
            reason = f"{exc.strerror or type(exc).__name__} ({exc.filename})"
            return self._say(s["save_failed"].format(reason=reason), error=True)
        finally:
            values.pop("api_key", None)
        self.api_key.value = ""
        self.api_key.placeholder = self._key_placeholder(_spec(self.provider.value))
        self.saved_path = path
        self._say(s["saved"].format(path=path))
        if self.on_saved is not None:
            self.on_saved(path)

    def _say(self, text: str, *, error: bool = False) -> None:
        color = "var(--jp-error-color1, #c62828)" if error else "var(--jp-success-color1, #2e7d32)"
        self.status.value = f'<span style="color: {color}">{html.escape(text)}</span>'
