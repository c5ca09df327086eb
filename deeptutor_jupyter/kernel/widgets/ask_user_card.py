"""The form the tutor shows when the model calls ``ask_user``, and the receipt it leaves behind.

Only standard ipywidgets controls, so JupyterLab, Notebook 7, VS Code and Colab all render it.
The card is a form, not a referee: it gates Submit the way a form would (a choice made, a field
filled) and sends ``on_submit(selections, custom_input, cancelled)``; the interaction
coordinator validates the answer again and reports problems back through :meth:`show_error`.

A click locks the card (state ``"submitted"``) until the owner answers with one of the ``show_*``
methods, so one card never sends two answers. The click handler may run on a kernel subshell
thread (DESIGN.md section 2): ``on_submit`` must hand its work to the loop with
``call_soon_threadsafe``.

Model text reaches the browser two ways: through ``HTML`` widgets, where it is escaped, and
through control labels (radio options, checkbox and button descriptions), which the frontend
renders as plain text (``description_allow_html`` stays False), so it is not escaped twice.
"""

from __future__ import annotations

import datetime
import html
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets

from deeptutor_jupyter.kernel.widgets.ask_user_strings import s

MODES: tuple[str, ...] = ("single", "multiple", "text", "number", "date", "directory", "toggle")
OPTION_MODES: frozenset[str] = frozenset({"single", "multiple", "toggle"})
STATES: tuple[str, ...] = ("open", "submitted", "answered", "cancelled", "expired", "not_resumable")

OnSubmit = Callable[[list[str], str, bool], None]

_SMALL = "font-size:85%;opacity:0.75"
_ERROR = "color:var(--jp-error-color1, #c62828)"


@dataclass(frozen=True)
class AskOption:
    id: str
    label: str
    description: str = ""
    recommended: bool = False


def parse_options(raw: Any) -> list[AskOption]:
    """Read the payload's options, skipping entries without an id and repeated ids.

    Ids are the contract the answer is judged by, so the first option with an id wins; the
    coordinator rejects a malformed payload before it gets here, this only keeps the card whole.
    """
    options: list[AskOption] = []
    seen: set[str] = set()
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping):
            continue
        option_id = str(item.get("id") or "")
        if not option_id or option_id in seen:
            continue
        seen.add(option_id)
        options.append(
            AskOption(
                id=option_id,
                label=str(item.get("label") or option_id),
                description=str(item.get("description") or ""),
                recommended=bool(item.get("recommended", False)),
            )
        )
    return options


def local_time(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _html(value: str, *classes: str) -> widgets.HTML:
    w = widgets.HTML(value)
    for name in classes:
        w.add_class(name)
    return w


def _small(text: str) -> str:
    return f'<div style="{_SMALL}">{html.escape(text)}</div>'


class AskUserCard(widgets.VBox):  # type: ignore[misc]
    """One ``ask_user`` question: a form while open, a read-only receipt once settled."""

    def __init__(
        self,
        payload: Mapping[str, Any],
        *,
        on_submit: OnSubmit | None = None,
        language: str = "en",
        workspace_hint: str = "",
        **kwargs: Any,
    ) -> None:
        self.payload = dict(payload)
        self.language = language
        self.on_submit = on_submit
        self.request_id = str(payload.get("id") or "")
        self.tool_call_id = str(payload.get("toolCallId") or "")
        self.session_id = str(payload.get("sessionId") or "")
        mode = str(payload.get("mode") or "")
        # An unknown mode still gets a way to answer; the coordinator has the final word.
        self.mode = mode if mode in MODES else "text"
        self.options = parse_options(payload.get("options"))
        self.allow_custom = bool(payload.get("allowCustom")) and self.mode in OPTION_MODES
        self.resumable = payload.get("resumable", True) is not False
        self.state = "open"
        self.controls: dict[str, Any] = {}

        self.title = _html(f"<b>{html.escape(str(payload.get('title') or ''))}</b>", "dt-ask-title")
        self.hint = _html("", "dt-ask-hint")
        self.error = _html("", "dt-ask-error")
        submit_label = str(payload.get("submitLabel") or "") or self._s("submit")
        self.submit_button = widgets.Button(
            description=submit_label, button_style="primary", disabled=True
        )
        self.submit_button.add_class("dt-ask-submit")
        self.cancel_button = widgets.Button(description=self._s("cancel"))
        self.cancel_button.add_class("dt-ask-cancel")
        super().__init__(children=[self.title], **kwargs)
        self.add_class("dt-ask-user")
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
        description = str(self.payload.get("description") or "")
        if description:
            parts.append(
                _html(f'<div style="white-space:pre-wrap">{html.escape(description)}</div>')
            )
        expires = self.payload.get("expiresAt")
        if isinstance(expires, int | float) and not isinstance(expires, bool):
            parts.append(_html(_small(self._s("expires").format(time=local_time(expires)))))
        parts.extend(self._mode_inputs(workspace_hint))
        if self.allow_custom:
            self.controls["custom"] = widgets.Text(
                description=self._s("other"),
                placeholder=self._s("other_placeholder"),
                layout=widgets.Layout(width="100%"),
            )
            parts.append(self.controls["custom"])
        parts += [widgets.HBox([self.submit_button, self.cancel_button]), self.hint, self.error]
        return parts

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
        full = widgets.Layout(width="100%")
        if self.mode == "number":
            self.controls["number"] = widgets.Text(placeholder=self._s("number_placeholder"))
            return [self.controls["number"]]
        if self.mode == "directory":
            text = widgets.Text(placeholder=self._s("directory_placeholder"), layout=full)
            self.controls["directory"] = text
            hint = self._s("directory_hint")
            if workspace_hint:
                hint += " " + self._s("workspace").format(path=workspace_hint)
            return [text, _html(_small(hint))]
        self.controls["text"] = widgets.Textarea(
            placeholder=self._s("text_placeholder"), layout=full
        )
        return [self.controls["text"]]

    def _shown_label(self, option: AskOption) -> str:
        return f"{option.label}  {self._s('recommended')}" if option.recommended else option.label

    def _descriptions(self) -> list[widgets.Widget]:
        lines = [
            f"<div><b>{html.escape(o.label)}</b> — {html.escape(o.description)}</div>"
            for o in self.options
            if o.description
        ]
        return [_html(f'<div style="{_SMALL}">{"".join(lines)}</div>')] if lines else []

    def _single(self) -> list[widgets.Widget]:
        # The frontend finds a radio input by its label, so two equal labels would share one.
        labels: list[tuple[str, str]] = []
        for option in self.options:
            label = self._shown_label(option)
            if any(label == seen for seen, _ in labels):
                label = f"{label} ({option.id})"
            labels.append((label, option.id))
        choice = widgets.RadioButtons(options=labels, value=None, layout={"width": "auto"})
        self.controls["choice"] = choice
        return [choice, *self._descriptions()]

    def _multiple(self) -> list[widgets.Widget]:
        checks: dict[str, widgets.Checkbox] = {}
        rows: list[widgets.Widget] = []
        for option in self.options:
            box = widgets.Checkbox(value=False, description=self._shown_label(option), indent=False)
            box.layout.width = "auto"
            checks[option.id] = box
            note = [_html(_small(option.description))] if option.description else []
            rows.append(widgets.HBox([box, *note], layout={"align_items": "center"}))
        self.controls["checks"] = checks
        return rows

    def _toggles(self) -> list[widgets.Widget]:
        toggles = {
            o.id: widgets.ToggleButton(
                value=False,
                description=self._shown_label(o),
                tooltip=o.description,
                layout={"width": "auto"},
            )
            for o in self.options
        }
        self.controls["toggles"] = toggles
        row = widgets.HBox(list(toggles.values()), layout={"flex_flow": "row wrap"})
        return [row, *self._descriptions()]

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
        text = str(self.controls[self.mode].value)
        # A number is sent without the spaces a learner may type around it: the coordinator
        # accepts only a plain number (interaction/coordinator.py: check_answer).
        return [], text.strip() if self.mode == "number" else text

    def _missing(self) -> str:
        """The hint key for what still blocks Submit, or "" when the form can be sent."""
        selections, custom = self.answer()
        if self.mode == "single":
            if selections or (self.allow_custom and self._custom().strip()):
                return ""
            return "need_choice_or_other" if self.allow_custom else "need_choice"
        if self.mode == "toggle":
            return "" if selections else "need_one"
        if self.mode == "multiple":
            return ""  # an empty checklist is an answer: none of these apply
        if self.mode == "date":
            return "" if custom else "need_date"
        return "" if custom.strip() else "need_text"

    # clicks --------------------------------------------------------------------------------
    def _on_change(self, _change: Mapping[str, Any]) -> None:
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
        word = self._s("continuing" if status == "continuing" else "answered")
        self._where = where = where or self._where
        if where:  # the turn goes on (or went on) in another notebook's cell
            key = "continues_in" if status == "continuing" else "continued_in"
            word = self._s(key).format(where=where)
        when = self._s("answered_at").format(time=local_time(answered_at))
        lines.append(_small(f"{when} · {word}"))
        self._settle("answered", "".join(f"<div>{line}</div>" for line in lines))

    def _verbatim(self, key: str, text: str) -> str:
        body = f'<span style="white-space:pre-wrap">{html.escape(text)}</span>'
        return f"{html.escape(self._s(key))} {body}"

    def show_cancelled(self, answered_at: float) -> None:
        when = self._s("cancelled_at").format(time=local_time(answered_at))
        self._settle("cancelled", f"<b>{html.escape(self._s('cancelled'))}</b>{_small(when)}")

    def show_expired(self) -> None:
        self._settle("expired", f"<div>⏱ {html.escape(self._s('expired'))}</div>")

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
