"""The form the tutor shows when the model calls ``ask_user``, and the receipt it leaves behind.

Only standard ipywidgets controls, so JupyterLab, Notebook 7, VS Code and Colab all render it.
The card is a form, not a referee: it gates Submit the way a form would (a choice made, a field
filled) and sends ``on_submit(selections, custom_input, cancelled)``; the interaction
coordinator validates the answer again and reports problems back through :meth:`show_error`.

A click locks the card (state ``"submitted"``) until the owner answers with one of the ``show_*``
methods, so one card never sends two answers. The click handler may run on a kernel subshell
thread (docs/architecture.md, "Kernel facts"): ``on_submit`` must hand its work to the loop with
``call_soon_threadsafe``.

Model text reaches the browser two ways: through ``HTMLMath`` widgets, where it is escaped and
its code spans and LaTeX render (widgets/inline.py), and through control labels (radio options,
checkbox and button descriptions), which the frontend renders as plain text
(``description_allow_html`` stays False), so it is not escaped twice. An option description with
code or LaTeX therefore leaves the label and is shown typeset under the options.
"""

from __future__ import annotations

import datetime
import html
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import ipywidgets as widgets
from pydantic import ValidationError

from deeptutor_jupyter.interaction.answers import is_number
from deeptutor_jupyter.interaction.schema import CHOICE_MODES, AskOption, AskUserPayload
from deeptutor_jupyter.kernel.i18n import text
from deeptutor_jupyter.kernel.widgets.inline import inline_html, is_rich
from deeptutor_jupyter.redact import clean


def s(key: str, language: str = "en") -> str:
    return text("ask", key, language)


OPTION_MODES = CHOICE_MODES
STATES: tuple[str, ...] = ("open", "submitted", "answered", "cancelled", "expired", "not_resumable")

OnSubmit = Callable[[list[str], str, bool], None]

_SMALL = "font-size:85%;opacity:0.75"
_ERROR = "color:var(--jp-error-color1, #c62828)"


def local_time(epoch: float) -> str:
    """``2026-12-02 19:53 UTC+8``: a learner in another zone (or a reader later) knows when."""
    moment = time.localtime(epoch)
    offset = moment.tm_gmtoff or 0
    sign = "+" if offset >= 0 else "-"
    hours, minutes = divmod(abs(offset) // 60, 60)
    zone = "UTC" if offset == 0 else f"UTC{sign}{hours}" + (f":{minutes:02d}" if minutes else "")
    return time.strftime("%Y-%m-%d %H:%M", moment) + " " + zone


def _html(value: str, *classes: str, math: bool = False) -> widgets.HTML:
    # Every text of the card passes here; a receipt repeats the learner's typed answer, and a
    # key typed into it must not stay in the widget state a notebook saves (redact.py).
    value = clean(value)
    w = widgets.HTMLMath(value) if math else widgets.HTML(value)
    for name in classes:
        w.add_class(name)
    return w


def _small(text: str) -> str:
    return f'<div style="{_SMALL}">{html.escape(text)}</div>'


def _fit(width: str = "auto", **more: str) -> widgets.Layout:
    """Never wider than the output area: ``width:100%`` plus the widget margin overflowed it,
    which drew a horizontal scrollbar under every card."""
    return widgets.Layout(width=width, max_width="100%", **more)


def _show(widget: widgets.DOMWidget, visible: bool) -> None:
    widget.layout.display = None if visible else "none"


def _on_enter(field: widgets.Text, submit: Callable[[], None]) -> None:
    """Enter in a one-line box submits, through the same gate as the button.

    The frontend sends ``{"event": "submit"}`` on Enter; listening with ``on_msg`` avoids
    ``Text.on_submit``, which ipywidgets 8 deprecates.
    """

    def handle(_widget: Any, content: Mapping[str, Any], _buffers: Any) -> None:
        if content.get("event") == "submit":
            submit()

    field.on_msg(handle)


SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules", ".git", ".venv", "venv"})


def existing_folders(root: Path, depth: int = 2, limit: int = 200) -> list[str]:
    """Folders under the notebook's folder, relative and sorted, hidden ones left out."""
    found: list[str] = []
    level = [root]
    for _ in range(depth):
        below: list[Path] = []
        for folder in level:
            try:
                children = sorted(p for p in folder.iterdir() if p.is_dir())
            except OSError:
                continue
            for child in children:
                if child.name.startswith(".") or child.name in SKIPPED_FOLDERS:
                    continue
                found.append(child.relative_to(root).as_posix())
                below.append(child)
                if len(found) >= limit:
                    return sorted(found)
        level = below
    return sorted(found)


class AskUserCard(widgets.VBox):  # type: ignore[misc]
    """One ``ask_user`` question: a form while open, a read-only receipt once settled."""

    def __init__(
        self,
        payload: AskUserPayload | Mapping[str, Any],
        *,
        on_submit: OnSubmit | None = None,
        language: str = "en",
        workspace_hint: str = "",
        workspace: Path | None = None,
        **kwargs: Any,
    ) -> None:
        # The one payload model the coordinator builds (interaction/schema.py); a stored row that
        # does not read as one (written by another version) is shown as such, never half-drawn.
        problem = ""
        if isinstance(payload, AskUserPayload):
            question = payload
        else:
            try:
                question = AskUserPayload.model_validate(dict(payload))
            except ValidationError as exc:
                first = exc.errors()[0]
                problem = f"{'.'.join(map(str, first['loc'])) or 'payload'}: {first['msg']}"
                question = AskUserPayload(
                    id=str(payload.get("id") or ""),
                    tool_call_id="",
                    session_id="",
                    title=str(payload.get("title") or ""),
                    mode="text",
                    resumable=False,
                    expires_at=0.0,
                )
        self.question = question
        # The hint is the notebook's folder (kernel/interactions.py passes it): list its folders.
        hinted = Path(workspace_hint) if workspace_hint else None
        self.workspace = workspace or (hinted if hinted and hinted.is_dir() else None)
        self.folders: list[str] = []
        self.language = language
        self.on_submit = on_submit
        self.request_id = question.id
        self.tool_call_id = question.tool_call_id
        self.session_id = question.session_id
        self.mode: str = question.mode
        self.options: list[AskOption] = list(question.options)
        self.allow_custom = question.allow_custom and self.mode in OPTION_MODES
        self.resumable = question.resumable
        self.state = "open"
        self.controls: dict[str, Any] = {}

        self.title = _html(f"<b>{inline_html(question.title)}</b>", "dt-ask-title", math=True)
        self.hint = _html("", "dt-ask-hint")
        self.error = _html("", "dt-ask-error")
        submit_label = question.submit_label or self._s("submit")
        self.submit_button = widgets.Button(
            description=submit_label, button_style="primary", disabled=True
        )
        self.submit_button.add_class("dt-ask-submit")
        self.cancel_button = widgets.Button(description=self._s("cancel"))
        self.cancel_button.add_class("dt-ask-cancel")
        kwargs.setdefault("layout", widgets.Layout(width="auto", max_width="100%"))
        super().__init__(children=[self.title], **kwargs)
        self.add_class("dt-ask-user")
        if problem:
            message = self._s("unreadable").format(reason=problem)
            self._settle("not_resumable", f"<div>⚠ {html.escape(message)}</div>")
            return
        if not self.resumable:
            self.show_not_resumable()
            return
        self.submit_button.on_click(self._on_submit_click)
        self.cancel_button.on_click(self._on_cancel_click)
        self.children = self._form(workspace_hint)
        for widget in self._inputs():
            widget.observe(self._on_change, names="value")
        self._refresh()

    _where = ""  # where the turn of this answer went on, when not under this card

    def _s(self, key: str) -> str:
        return s(key, self.language)

    # building the form ---------------------------------------------------------------------
    def _form(self, workspace_hint: str) -> list[widgets.Widget]:
        parts: list[widgets.Widget] = [self.title]
        description = self.question.description
        if description:
            parts.append(
                _html(f"<div>{inline_html(description)}</div>", "dt-ask-description", math=True)
            )
        if self.question.expires_at > 0:
            parts.append(
                _html(_small(self._s("expires").format(time=local_time(self.question.expires_at))))
            )
        parts.extend(self._mode_inputs(workspace_hint))
        if self.allow_custom:
            self.controls["custom"] = widgets.Text(
                description=self._s("other"),
                placeholder=self._s("other_placeholder"),
                layout=_fit(),
            )
            parts.append(self.controls["custom"])
        for field in self._one_line_fields():
            _on_enter(field, self._on_submit_click)
        parts += [widgets.HBox([self.submit_button, self.cancel_button]), self.hint, self.error]
        return parts

    def _one_line_fields(self) -> list[widgets.Text]:
        """Text boxes where Enter submits (the same rule as the Submit button)."""
        names = ("custom", "text", "number", "directory")
        return [c for n in names if isinstance(c := self.controls.get(n), widgets.Text)]

    def _mode_inputs(self, workspace_hint: str) -> list[widgets.Widget]:
        if self.mode == "single":
            return self._single()
        if self.mode == "multiple":
            return self._multiple()
        if self.mode == "toggle":
            return self._toggles()
        if self.mode == "date":
            self.controls["date"] = widgets.DatePicker(description=self._s("date"), value=None)
            return [self.controls["date"]]
        if self.mode == "number":
            self.controls["number"] = widgets.Text(
                placeholder=self._s("number_placeholder"), layout=_fit("16em")
            )
            return [self.controls["number"]]
        if self.mode == "directory":
            return self._directory(workspace_hint)
        return self._text()

    def _text(self) -> list[widgets.Widget]:
        """One line where Enter submits; "Several lines" swaps in a box where Enter is a newline."""
        self.controls["text"] = widgets.Text(placeholder=self._s("text_placeholder"), layout=_fit())
        self.controls["text_lines"] = widgets.Textarea(
            placeholder=self._s("text_lines_placeholder"), layout=_fit(height="6em")
        )
        _show(self.controls["text_lines"], False)
        lines = widgets.ToggleButton(
            value=False, description=self._s("several_lines"), icon="align-left"
        )
        lines.add_class("dt-ask-lines")
        lines.observe(self._on_lines_toggle, names="value")
        self.controls["lines"] = lines
        return [self.controls["text"], self.controls["text_lines"], lines]

    def _on_lines_toggle(self, change: Mapping[str, Any]) -> None:
        one, many = self.controls["text"], self.controls["text_lines"]
        if change["new"]:
            many.value = one.value
        else:
            one.value = " ".join(many.value.split("\n"))
        _show(one, not change["new"])
        _show(many, bool(change["new"]))
        self._refresh()

    def _directory(self, workspace_hint: str) -> list[widgets.Widget]:
        """Existing folders to pick from; a new one is allowed and said to be new."""
        self.folders = existing_folders(self.workspace) if self.workspace else []
        self.controls["directory"] = widgets.Combobox(
            options=self.folders,
            placeholder=self._s("directory_placeholder"),
            ensure_option=False,
            layout=_fit(),
        )
        hint = self._s("directory_hint")
        if workspace_hint:
            hint += " " + self._s("workspace").format(path=workspace_hint)
        self.folder_note = _html("", "dt-ask-folder-note")
        return [self.controls["directory"], self.folder_note, _html(_small(hint))]

    def _folder_note(self) -> str:
        typed = str(self.controls["directory"].value).strip().strip("/")
        if not typed:
            return ""
        key = "folder_exists" if typed in self.folders or self._is_dir(typed) else "folder_new"
        return _small(self._s(key).format(path=typed))

    def _is_dir(self, typed: str) -> bool:
        return self.workspace is not None and (self.workspace / typed).is_dir()

    def _shown_label(self, option: AskOption) -> str:
        """``Label ★ recommended — description``: the same words in every choice mode.

        Radio and checkbox labels are plain text in the frontend, so the description rides in
        the label itself rather than in a list detached from its option.
        """
        label = f"{option.label}  {self._s('recommended')}" if option.recommended else option.label
        plain = option.description and not is_rich(option.description)
        return f"{label} — {option.description}" if plain else label

    def _descriptions(self, every: bool = False) -> list[widgets.Widget]:
        """Descriptions typeset under the options: all of them (toggles), or those with code or
        LaTeX, which a plain-text label would show raw."""
        lines = [
            f"<div><b>{inline_html(o.label)}</b> — {inline_html(o.description)}</div>"
            for o in self.options
            if o.description and (every or is_rich(o.description) or is_rich(o.label))
        ]
        if not lines:
            return []
        return [_html(f'<div style="{_SMALL}">{"".join(lines)}</div>', "dt-ask-notes", math=True)]

    def _single(self) -> list[widgets.Widget]:
        # The frontend finds a radio input by its label, so two equal labels would share one.
        labels: list[tuple[str, str]] = []
        for option in self.options:
            label = self._shown_label(option)
            if any(label == seen for seen, _ in labels):
                label = f"{label} ({option.id})"
            labels.append((label, option.id))
        choice = widgets.RadioButtons(options=labels, value=None, layout=_fit())
        choice.add_class("dt-ask-options")
        self.controls["choice"] = choice
        return [choice, *self._descriptions()]

    def _multiple(self) -> list[widgets.Widget]:
        checks: dict[str, widgets.Checkbox] = {}
        for option in self.options:
            box = widgets.Checkbox(
                value=False, description=self._shown_label(option), indent=False, layout=_fit()
            )
            checks[option.id] = box
        self.controls["checks"] = checks
        column = widgets.VBox(list(checks.values()), layout=_fit())
        column.add_class("dt-ask-options")
        return [column, *self._descriptions()]

    def _toggles(self) -> list[widgets.Widget]:
        toggles: dict[str, widgets.ToggleButton] = {}
        for o in self.options:
            label = f"{o.label}  {self._s('recommended')}" if o.recommended else o.label
            button = widgets.ToggleButton(
                value=False, description=label, tooltip=o.description, icon="square-o"
            )
            button.layout.width = "auto"
            button.observe(self._on_toggle, names="value")
            toggles[o.id] = button
        self.controls["toggles"] = toggles
        row = widgets.HBox(list(toggles.values()), layout={"flex_flow": "row wrap"})
        return [row, *self._descriptions(every=True)]

    @staticmethod
    def _on_toggle(change: Mapping[str, Any]) -> None:
        """On is a filled, coloured button with a tick; off a plain one with an empty box."""
        button = change["owner"]
        button.button_style = "info" if change["new"] else ""
        button.icon = "check-square" if change["new"] else "square-o"

    def _inputs(self) -> Iterator[widgets.DOMWidget]:
        for control in self.controls.values():
            if isinstance(control, dict):
                yield from control.values()
            else:
                yield control

    # reading the answer --------------------------------------------------------------------
    def _custom(self) -> str:
        custom = self.controls.get("custom")
        return str(custom.value) if custom is not None else ""

    def _picked(self, role: str) -> list[str]:
        return [oid for oid, w in self.controls.get(role, {}).items() if w.value]

    def answer(self) -> tuple[list[str], str]:
        """The ``(selections, custom_input)`` the form holds now: option ids, text verbatim."""
        if self.mode == "single":
            value = self.controls["choice"].value
            return ([] if value is None else [str(value)]), self._custom()
        if self.mode in ("multiple", "toggle"):
            return self._picked("checks" if self.mode == "multiple" else "toggles"), self._custom()
        if self.mode == "date":
            day: datetime.date | None = self.controls["date"].value
            return [], "" if day is None else day.isoformat()
        if self.mode == "text" and self.controls["lines"].value:
            return [], str(self.controls["text_lines"].value)
        text = str(self.controls[self.mode].value)
        # A number is sent without the spaces a learner may type around it: the coordinator
        # accepts only a plain number (interaction/answers.py: check_answer).
        return [], text.strip() if self.mode == "number" else text

    def _missing(self) -> str:
        """The hint key for what still blocks Submit, or "" when the form can be sent."""
        # One rule for every mode (README, "When the tutor needs to ask"): Submit, and Enter in
        # a text box, need an answer: an option or Other text, or a value.
        selections, custom = self.answer()
        if self.mode in OPTION_MODES:
            if selections or (self.allow_custom and self._custom().strip()):
                return ""
            word = "need_choice" if self.mode == "single" else "need_one"
            return f"{word}_or_other" if self.allow_custom else word
        if self.mode == "number":
            return "" if is_number(custom) else ("need_number" if custom.strip() else "need_text")
        if self.mode == "date":
            return "" if custom else "need_date"
        return "" if custom.strip() else "need_text"

    # clicks --------------------------------------------------------------------------------
    def _on_change(self, _change: Mapping[str, Any]) -> None:
        # A reported problem belongs to the value that was sent; editing it starts afresh.
        if self.state == "open":
            self.error.value = ""
        if self.mode == "directory":
            self.folder_note.value = self._folder_note()
        self._refresh()

    def _refresh(self) -> None:
        if self.state != "open":
            return
        missing = self._missing()
        self.submit_button.disabled = bool(missing)
        self.hint.value = _small(self._s(missing)) if missing else ""

    def _on_submit_click(self, _button: widgets.Button | None = None) -> None:
        # Button.click() from code ignores ``disabled``; check the state and the gate here.
        if self.state != "open" or self._missing():
            return
        selections, custom = self.answer()
        self._deliver(selections, custom, cancelled=False)

    def _on_cancel_click(self, _button: widgets.Button | None = None) -> None:
        if self.state == "open":
            self._deliver([], "", cancelled=True)

    def _deliver(self, selections: list[str], custom: str, *, cancelled: bool) -> None:
        self._lock()
        self.hint.value = _small(self._s("sending"))
        if self.on_submit is None:
            return
        try:
            self.on_submit(selections, custom, cancelled)
        except Exception as exc:  # a lost answer must show up in the card, not in a log
            self.show_error(
                self._s("callback_failed").format(reason=f"{type(exc).__name__}: {exc}")
            )

    def _lock(self) -> None:
        self.state = "submitted"
        self.error.value = ""
        for widget in (*self._inputs(), self.submit_button, self.cancel_button):
            widget.disabled = True

    def _unlock(self) -> None:
        self.state = "open"
        for widget in (*self._inputs(), self.cancel_button):
            widget.disabled = False
        self._refresh()

    # what the owner calls afterwards -------------------------------------------------------
    def show_receipt(
        self,
        selections: list[str],
        custom_input: str,
        answered_at: float,
        status: str = "continuing",
        where: str = "",
    ) -> None:
        """Replace the form with what was answered, when, and whether the turn goes on (and
        where, when that is another notebook's cell)."""
        labels = {o.id: o.label for o in self.options}
        lines: list[str] = []
        if self.mode in OPTION_MODES:
            chosen = [html.escape(labels.get(sid, sid)) for sid in selections]
            if chosen:
                items = "".join(f"<li>{c}</li>" for c in chosen)
                lines.append(f"{html.escape(self._s('chosen'))}<ul>{items}</ul>")
            else:
                lines.append(html.escape(self._s("nothing_chosen")))
            if custom_input:
                lines.append(self._verbatim("other_answer", custom_input))
        else:
            lines.append(self._verbatim("your_answer", custom_input))
        when = self._s("answered_at").format(time=local_time(answered_at))
        self._where = where = where or self._where
        if where:  # the turn goes on (or went on) in another notebook's cell
            key = "continues_in" if status == "continuing" else "continued_in"
            when += " · " + self._s(key).format(where=where)
        elif status == "continuing":
            when += " · " + self._s("continuing")
        lines.append(_small(when))
        self._settle("answered", "".join(f"<div>{line}</div>" for line in lines))

    def _verbatim(self, key: str, text: str) -> str:
        body = f'<span style="white-space:pre-wrap">{html.escape(text)}</span>'
        return f"{html.escape(self._s(key))} {body}"

    def show_cancelled(self, answered_at: float) -> None:
        when = self._s("cancelled_at").format(time=local_time(answered_at))
        self._settle("cancelled", f"<b>{html.escape(self._s('cancelled'))}</b>{_small(when)}")

    def show_expired(self) -> None:
        self._settle("expired", f"<div>{html.escape(self._s('expired'))}</div>")

    def show_not_resumable(self) -> None:
        self._settle("not_resumable", f"<div>⚠ {html.escape(self._s('not_resumable'))}</div>")

    def show_error(self, message: str, *, keep_disabled: bool = False) -> None:
        """Show an error inside the card; reopen the form unless the error is final.

        Validation errors (a number that does not parse) reopen the form so the learner can fix
        it; final ones (the request was already answered) pass ``keep_disabled=True``. A card that
        already shows a receipt only gains the line.
        """
        if self.state in ("open", "submitted"):
            if keep_disabled:
                self._lock()
                self.hint.value = ""
            else:
                self._unlock()
        self.error.value = f'<div style="{_ERROR}">⚠ {html.escape(message)}</div>'
        if self.error not in self.children:
            self.children = [*self.children, self.error]

    def _settle(self, state: str, body: str) -> None:
        self.state = state
        self.error.value = ""
        for widget in (*self._inputs(), self.submit_button, self.cancel_button):
            widget.disabled = True
        receipt = _html(body, "dt-ask-receipt", f"dt-ask-{state.replace('_', '-')}")
        self.children = [self.title, receipt]
