"""The card ``%tutor`` shows when no model is configured: pick a provider, save settings.toml.

The key is typed into a ``Password`` widget, whose value is still widget state and therefore ends
up in a saved notebook's widget metadata; the card clears it as soon as it is written to the
0600 settings file, and never echoes it in any message.
"""

from __future__ import annotations

import asyncio
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
from deeptutor_jupyter.kernel.i18n import Texts
from deeptutor_jupyter.kernel.widgets.fallback import TextFallback
from deeptutor_jupyter.kernel.widgets.turn_view import with_code
from deeptutor_jupyter.providers.specs import ProviderSpec, api_key_from_env, find_provider

# The choices the card offers; any other provider is configured by hand (see the instructions).
CHOICES: tuple[str, ...] = ("openai", "deepseek", "anthropic", "ollama", "openai-compatible")


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


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


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
        reruns: bool = False,
        **kwargs: Any,
    ) -> None:
        self._environ = os.environ if environ is None else environ
        resolved = resolved or resolve_settings(environ=self._environ)
        self.language = language or resolved.settings.language
        self.home = Path(home) if home is not None else resolved.settings.home
        self.on_saved = on_saved
        # True when a Save that leaves nothing missing runs the waiting question itself
        # (kernel/start.py show_setup): then "run your cell again" would be wrong.
        self.reruns = reruns
        self.saved_path: Path | None = None
        s = self._strings

        start = resolved.settings.provider if resolved.settings.provider in CHOICES else "openai"
        self.provider = widgets.Dropdown(
            options=[(s[f"label_{name}"], name) for name in CHOICES],
            value=start,
            description=s["provider"],
        )
        # Wide enough for "API key (optional)" and "服务商": a fixed 80px label cut them off.
        style = {"description_width": "9em"}
        field = widgets.Layout(width="auto", max_width="40em")
        self.provider.style.description_width = style["description_width"]
        self.provider.layout = widgets.Layout(width="auto", max_width="40em")
        self.model = widgets.Text(description=s["model"], style=style, layout=field)
        self.base_url = widgets.Text(
            description=s["base_url"],
            style=style,
            layout=widgets.Layout(width="auto", max_width="40em"),
        )
        self.api_key = widgets.Password(
            description=s["api_key"],
            style=style,
            layout=widgets.Layout(width="auto", max_width="40em"),
        )
        self.save_button = widgets.Button(description=s["save"], button_style="primary")
        self.test_button = widgets.Button(description=s["test"], icon="plug")
        self.test_button.add_class("dt-setup-test")
        self.status = widgets.HTML()
        self.test_task: asyncio.Task[None] | None = None
        self._loop = _running_loop()
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
        self.test_button.on_click(self._on_test)
        self.missing = resolved.missing()
        self.header = widgets.HTML(self._header_html(self.missing))
        fields = [self.provider, self.model, self.base_url, self.api_key]
        buttons = widgets.HBox([self.save_button, self.test_button])
        children = [self.header, *fields, buttons, self.status, self.instructions]
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
    def _strings(self) -> Mapping[str, str]:
        return Texts("setup", self.language)

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
        example_model = spec.default_model or ("llama3.2" if spec.is_local else "gpt-4o-mini")
        self.model.placeholder = s["model_placeholder"].format(example=example_model)
        example_url = spec.default_base_url or "http://localhost:8000/v1"
        self.base_url.placeholder = s["base_url_placeholder"].format(example=example_url)
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

    def _problem(self) -> str:
        """What the typed settings still lack, worded for the learner; "" when complete."""
        spec, s = _spec(self.provider.value), self._strings
        key = "" if spec.is_local else self.api_key.value.strip()
        if not self.model.value.strip():
            return s["need_model"]
        if self._wants_base_url(spec) and not self.base_url.value.strip():
            return s["need_base_url"]
        has_key = key or self._env_key_var(spec) or self._file_has_key_for(spec)
        if spec.needs_key and not has_key:
            var = spec.key_envs[0] if spec.key_envs else KEY_ENV
            return s["need_key"].format(label=spec.label, var=var)
        return ""

    def _on_save(self, _button: widgets.Button | None = None) -> None:
        spec = _spec(self.provider.value)
        model, base_url = self.model.value.strip(), self.base_url.value.strip()
        key = "" if spec.is_local else self.api_key.value.strip()
        if problem := self._problem():
            return self._say(problem, error=True)
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
        # What the next %tutor will resolve: the file just written, under this environment.
        environ = {**self._environ, "DEEPTUTOR_HOME": str(self.home)}
        self.missing = resolve_settings(environ=environ).missing()
        self.header.value = self._header_html(self.missing)
        said = s["saved"].format(path=path)
        if not self.missing:
            said += " " + s["all_set"] + " " + s["running_below" if self.reruns else "run_again"]
        self._say(said)
        if self.on_saved is not None:
            self.on_saved(path)

    # testing the connection ------------------------------------------------------------------
    def _typed_key(self, spec: ProviderSpec) -> str | None:
        """The key a turn would use with these settings: typed, then environment, then file."""
        if spec.is_local:
            return None
        typed = str(self.api_key.value).strip()
        if typed:
            return typed
        from_env = self._environ.get(KEY_ENV, "").strip() or api_key_from_env(spec, self._environ)
        if from_env:
            return str(from_env)
        if self._file_has_key_for(spec):
            return str(self._file_data().get("api_key") or "") or None
        return None

    def _on_test(self, _button: widgets.Button | None = None) -> None:
        s = self._strings
        if problem := self._problem():
            return self._say(problem, error=True)
        loop = self._loop or _running_loop()
        if loop is None:  # no kernel loop (a plain script): nothing can run in the background
            return self._say(s["test_failed"].format(message="no event loop"), error=True)
        self._say(s["testing"].format(label=_spec(self.provider.value).label))
        if _running_loop() is loop:
            self._start_test()
        else:  # a click handled on a kernel subshell thread: tasks belong to the kernel loop
            loop.call_soon_threadsafe(self._start_test)

    def _start_test(self) -> None:
        self.test_button.disabled = True
        self.test_task = asyncio.get_running_loop().create_task(self.test_connection())

    async def test_connection(self) -> None:
        """One short request with what the card holds; a failure reads like a turn's error card."""
        from deeptutor_jupyter.providers import ChatRequest, ProviderError, make_model

        spec, s = _spec(self.provider.value), self._strings
        model_name = self.model.value.strip()
        base_url = self.base_url.value.strip() if self._wants_base_url(spec) else None
        try:
            model = make_model(
                provider=spec.name,
                model=model_name,
                base_url=base_url or None,
                api_key=self._typed_key(spec),
                timeout=30.0,
                connect_timeout=10.0,
                max_retries=0,
            )
            request = ChatRequest(
                model=model_name,
                messages=[{"role": "user", "content": "Reply with the word OK."}],
                max_tokens=5,
            )
            try:
                async for _event in model.stream(request):
                    pass
            finally:
                await model.aclose()
        except ProviderError as exc:
            fix = f" {s['how_to_fix']} {exc.hint}" if exc.hint else ""
            self._say(s["test_failed"].format(message=exc.message) + fix, error=True)
        except Exception as exc:  # a setting the client refuses (a malformed URL)
            self._say(s["test_failed"].format(message=f"{type(exc).__name__}: {exc}"), error=True)
        else:
            self._say(s["test_ok"].format(model=model_name, label=spec.label))
        finally:
            self.test_button.disabled = False

    def _say(self, text: str, *, error: bool = False) -> None:
        color = "var(--jp-error-color1, #c62828)" if error else "var(--jp-success-color1, #2e7d32)"
        # with_code: provider hints name commands in backticks (`%tutor config`)
        self.status.value = f'<span style="color: {color}">{with_code(text)}</span>'
