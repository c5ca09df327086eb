"""``%tutor memory forget --all``: say what will go, ask for a deliberate yes, then forget.

The red button stays disabled until the learner ticks the checkbox; ``Button.click()`` from code
ignores ``disabled``, so the handler checks the box again. Saved notebooks keep their trace
bundles (``import_notebooks`` could rebuild L1 from them), which the card says, with the command
that removes them.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import ipywidgets as widgets

from deeptutor_jupyter.kernel.i18n import Texts
from deeptutor_jupyter.kernel.widgets.fallback import TextFallback
from deeptutor_jupyter.memory import MemoryStore

_SMALL = "font-size:85%;opacity:0.75"
_ERROR = "color:var(--jp-error-color1, #c62828)"


@dataclass(frozen=True)
class MemoryCounts:
    turns: int
    files: int
    documents: int


def count_memory(store: MemoryStore) -> MemoryCounts:
    files = list((store.root / "trace").glob("*/*.jsonl"))
    documents = [p for layer in ("L2", "L3") for p in (store.root / layer).glob("*.md")]
    return MemoryCounts(len(store.known_trace_ids()), len(files), len(documents))


class ForgetCard(TextFallback, widgets.VBox):  # type: ignore[misc]
    """A confirmation form for ``MemoryStore.forget_all``; a receipt once answered."""

    def __init__(self, store: MemoryStore, *, language: str = "en") -> None:
        self.store, self.language = store, language
        self.state = "open"  # then "deleted" or "cancelled"
        self.outcome = ""  # the receipt's words, for the saved notebook
        s = self._s = Texts("forget", language)
        counts = count_memory(store)
        self.explanation = widgets.HTML(
            f"<div>{html.escape(s['what'].format(**asdict(counts)))}</div>"
            f'<div style="{_SMALL}">{html.escape(s["notebooks"])}</div>'
        )
        self.confirm = widgets.Checkbox(value=False, description=s["confirm"], indent=False)
        self.confirm.layout.width = "auto"
        self.delete_button = widgets.Button(
            description=s["delete"], button_style="danger", icon="trash", disabled=True
        )
        self.cancel_button = widgets.Button(description=s["cancel"])
        self.receipt = widgets.HTML()
        self.confirm.observe(self._on_confirm, names="value")
        self.delete_button.on_click(self._on_delete)
        self.cancel_button.on_click(self._on_cancel)
        title = widgets.HTML(f"<h4>{html.escape(s['title'])}</h4>")
        buttons = widgets.HBox([self.delete_button, self.cancel_button])
        super().__init__(children=[title, self.explanation, self.confirm, buttons, self.receipt])
        self.add_class("dt-forget")

    def fallback_markdown(self) -> str:
        return f"**{self._s['title']}**\n\n{self.outcome or self._s['open']}\n"

    def _on_confirm(self, change: Mapping[str, Any]) -> None:
        if self.state == "open":
            self.delete_button.disabled = not change["new"]

    def _on_delete(self, _button: widgets.Button | None = None) -> None:
        if self.state != "open" or not self.confirm.value:
            return
        counts = count_memory(self.store)
        try:
            self.store.forget_all()
        except OSError as exc:
            reason = f"{exc.strerror or type(exc).__name__} ({exc.filename})"
            text = html.escape(self._s["failed"].format(reason=reason))
            self.receipt.value = f'<div style="{_ERROR}">{text}</div>'
            return
        when = time.strftime("%Y-%m-%d %H:%M:%S")
        self._settle("deleted", self._s["deleted"].format(time=when, **asdict(counts)))

    def _on_cancel(self, _button: widgets.Button | None = None) -> None:
        if self.state == "open":
            self._settle("cancelled", self._s["cancelled"])

    def _settle(self, state: str, text: str) -> None:
        self.state = state
        for widget in (self.confirm, self.delete_button, self.cancel_button):
            widget.disabled = True
        self.receipt.value = f"<div><b>{html.escape(text)}</b></div>"
        self.outcome = text
        self.refresh_fallback()
