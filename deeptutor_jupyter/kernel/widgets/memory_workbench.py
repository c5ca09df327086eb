"""``%tutor memory``: read, correct and consolidate the L2/L3 documents, with their provenance.

Every write goes through the store, so a human is held to the same rules as a model: a row edit
is an ``edit`` op (validated, reasons shown), a delete is ``delete_entry`` (logged with its
reason), the raw editor is ``overwrite`` (strict parse, nothing written on failure).

Consolidation previews on an in-memory copy (``apply=False``); Apply then applies exactly the
previewed ops with ``apply_ops`` under the document's run lock, so what is written is what was
shown, never a second, different model answer. A preview of a document that changed since is
refused rather than applied to text nobody looked at.

The background consolidation after turns (``runtime/upkeep.py``) is shown at the bottom: when
it last ran, with which model, what it read and applied or why it failed, and a checkbox that
writes ``auto_consolidate`` to settings.toml.

Learner and model text reaches the browser escaped, in ``HTML`` widgets and in the Markdown view.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import ipywidgets as widgets

from deeptutor_jupyter.kernel.i18n import Texts
from deeptutor_jupyter.kernel.widgets.fallback import TextFallback
from deeptutor_jupyter.kernel.widgets.turn_view import markdown_bundle
from deeptutor_jupyter.memory import (
    DELETE_REASONS,
    L3_KEYS,
    Document,
    DocumentError,
    Entry,
    MemoryStore,
    TraceRecord,
)
from deeptutor_jupyter.memory.consolidate import (
    MODES,
    ConsolidationResult,
    Mode,
    RunBusyError,
    consolidate,
    covers_unseen,
)
from deeptutor_jupyter.memory.ops import DeleteReason, OpsPreview
from deeptutor_jupyter.memory.runs import RunLog, RunRecord
from deeptutor_jupyter.memory.trace import SURFACE_RE
from deeptutor_jupyter.providers.base import ChatModel

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings

DocKey = tuple[str, str]
MODEL_MODES: frozenset[str] = frozenset({"update", "audit", "dedup"})
ROW_LIMIT = 200  # rows are widgets; beyond this the Markdown view and Raw still show everything
SNIPPET = 80

_SMALL = "font-size:85%;opacity:0.75"
_ERROR = "color:var(--jp-error-color1, #c62828)"
_OK = "color:var(--jp-success-color1, #2e7d32)"
_ADDED = "color:var(--jp-success-color1, #2e7d32)"
_REMOVED = "color:var(--jp-error-color1, #c62828)"
_HUNK = "color:var(--jp-info-color1, #0277bd)"


def doc_name(key: DocKey) -> str:
    return f"{key[0]}/{key[1]}.md"


def doc_title(key: DocKey | str, language: str = "en") -> str:
    """A document in a learner's words ("About you", "Notes from quizzes"), not its file name
    ("L3/profile.md"); the panel's memory tab uses the same words (memorynames.ts)."""
    path = key if isinstance(key, str) else doc_name(key)
    layer, _, name = path.removesuffix(".md").partition("/")
    s = Texts("memory", language)
    found = s[f"doc_{layer}_{name}"]
    return s["doc_other"].format(name=name or layer) if found.startswith("doc_") else found


def document_keys(store: MemoryStore) -> list[DocKey]:
    """The four L3 documents, then every L2 surface that has a document on disk."""
    l2 = store.path("L2", "chat").parent
    surfaces = sorted(p.stem for p in l2.glob("*.md") if SURFACE_RE.match(p.stem))
    return [*(("L3", k) for k in L3_KEYS), *(("L2", s) for s in surfaces)]


def snippet(text: str, limit: int = SNIPPET) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def provenance(refs: list[str], traces: Mapping[str, TraceRecord], language: str) -> str:
    """Plain text naming each cited trace: its UTC day (its L1 file) and question."""
    s = Texts("memory", language)
    if not refs:
        return s["no_refs"]
    parts = []
    for ref in refs:
        record = traces.get(ref)
        if record is None:
            parts.append(s["from_unknown"].format(id=ref))
        else:
            question = snippet(record.question)
            parts.append(s["from_trace"].format(id=ref, date=record.day(), question=question))
    return "; ".join(parts)


def display_markdown(
    doc: Document, language: str, traces: Mapping[str, TraceRecord] | None = None
) -> str:
    """The document for reading: learner and model text HTML-escaped, each citation a number.

    Not the stored text: Markdown renderers in JupyterLab have no footnotes, and read
    ``[^1][^2]`` with ``[^2]: t_2`` as one link (only one footnote showed), so the numbers are
    superscripts and the cited traces a numbered list below, with their day and question.
    """
    if doc.is_empty():
        return Texts("memory", language)["empty"]
    labels: dict[str, int] = {}
    out: list[str] = [f"# {html.escape(doc.title, quote=False)}", ""] if doc.title else []
    for section in doc.sections:
        out.append(f"## {html.escape(section.name, quote=False)}")
        for entry in section.entries:
            marks = "".join(
                f"<sup>[{labels.setdefault(ref, len(labels) + 1)}]</sup>" for ref in entry.refs
            )
            out.append(f"- {html.escape(entry.text, quote=False)}{' ' + marks if marks else ''}")
        out.append("")
    if labels:
        out += ["---", ""]
        out += [
            f"{n}. {html.escape(provenance([ref], traces or {}, language), quote=False)}"
            for ref, n in labels.items()
        ]
    return "\n".join(out).rstrip() + "\n"


_ID_COMMENT = re.compile(r"\s*<!--\s*m_[A-Za-z0-9_-]+\s*-->")


def diff_html(diff: str) -> str:
    """A unified diff as an escaped ``<pre>``, added lines green and removed lines red.

    The hidden ``<!--m_id-->`` of each line is left out: it is bookkeeping, not what changed.
    """
    lines = []
    for raw in diff.splitlines():
        line = _ID_COMMENT.sub("", raw)
        style = ""
        if line.startswith(("+++", "---")):
            style = "font-weight:bold"
        elif line.startswith("+"):
            style = _ADDED
        elif line.startswith("-"):
            style = _REMOVED
        elif line.startswith("@@"):
            style = _HUNK
        body = html.escape(line)
        lines.append(f'<span style="{style}">{body}</span>' if style else body)
    text = "\n".join(lines)
    return f'<pre style="white-space:pre-wrap;margin:0">{text}</pre>'


def rejected_html(title: str, rejected: list[tuple[dict[str, Any], str]]) -> str:
    if not rejected:
        return ""
    items = "".join(
        f"<li><code>{html.escape(snippet(json.dumps(op, ensure_ascii=False), 200))}</code>"
        f" — {html.escape(reason)}</li>"
        for op, reason in rejected
    )
    return f"<div>{html.escape(title)}<ul>{items}</ul></div>"


def message_html(text: str, *, error: bool = False) -> str:
    return f'<div style="{_ERROR if error else _OK}">{html.escape(text)}</div>'


def _show(widget: widgets.DOMWidget, visible: bool) -> None:
    widget.layout.display = None if visible else "none"


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def background_summary(
    resolved: ResolvedSettings, last: RunRecord | None, language: str
) -> tuple[str, bool]:
    """What the background consolidation last did, in words; True when that was a failure."""
    from deeptutor_jupyter.kernel.widgets.ask_user_card import local_time

    s = Texts("memory", language)
    settings = resolved.settings
    if not settings.auto_consolidate:
        return s["auto_off"], False
    model = f"{settings.provider}/{settings.model}" if settings.model else "?"
    if last is None:
        return s["auto_never"].format(every=settings.consolidate_every, model=model), False
    when = local_time(last.at)
    if last.error:
        return s["auto_no_model"].format(when=when, reason=last.error), True
    parts = []
    for doc in last.documents:
        title = doc_title(doc.document, language)
        if doc.status == "failed":
            parts.append(s["auto_doc_failed"].format(doc=title, reason=doc.error))
        elif doc.status == "busy":
            parts.append(s["auto_doc_busy"].format(doc=title))
        else:
            traces = _counted(len(doc.consumed), s["trace"], s["traces"])
            ops = _counted(len(doc.ops), s["op"], s["ops"])
            parts.append(s["auto_doc_done"].format(doc=title, traces=traces, ops=ops))
    what = "; ".join(parts)
    return s["auto_last"].format(when=when, model=last.model or model, what=what), last.failed


def _counted(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


@dataclass
class Preview:
    """A finished ``apply=False`` run and what Apply needs to write exactly that."""

    key: DocKey
    mode: str
    before: str
    result: ConsolidationResult
    unseen: list[str] = field(default_factory=list)

    def marks_seen(self) -> bool:
        return covers_unseen(self.mode, self.unseen, self.result)

    def has_work(self) -> bool:
        return bool(self.result.ops_applied) or self.marks_seen()


class EntryRow(widgets.VBox):  # type: ignore[misc]
    """One entry: its text and provenance, an inline editor, and delete with a reason.

    ``on_save`` and ``on_delete`` return an error to show in the row, or "" when the owner
    took over (it rebuilds the rows after a successful write).
    """

    def __init__(
        self,
        entry: Entry,
        provenance_text: str,
        *,
        language: str,
        on_save: Callable[[Entry, str], str],
        on_delete: Callable[[Entry, str], str],
    ) -> None:
        s = Texts("memory", language)
        self.entry, self.language = entry, language
        self._on_save_cb, self._on_delete_cb = on_save, on_delete
        self.text = widgets.HTML(
            f"<div>{html.escape(entry.text)}</div>"
            f'<div style="{_SMALL}">{html.escape(provenance_text)}</div>'
        )
        self.edit_button = widgets.Button(description=s["edit"], icon="pencil")
        # The placeholder's value is "", not None: a Dropdown whose value is None shows blank.
        self.reason = widgets.Dropdown(
            options=[(s["reason"], ""), *((s[f"reason_{r}"], r) for r in DELETE_REASONS)],
            value="",
            layout=widgets.Layout(width="11em"),
        )
        self.delete_button = widgets.Button(description=s["delete"], icon="trash", disabled=True)
        self.edit_text = widgets.Text(layout=widgets.Layout(width="100%"))
        self.save_button = widgets.Button(description=s["save"], button_style="primary")
        self.cancel_button = widgets.Button(description=s["cancel"])
        self.editor = widgets.HBox([self.edit_text, self.save_button, self.cancel_button])
        self.status = widgets.HTML()
        _show(self.editor, False)
        self.edit_button.on_click(self._on_edit)
        self.save_button.on_click(self._on_save)
        self.cancel_button.on_click(lambda _b: _show(self.editor, False))
        self.reason.observe(self._on_reason, names="value")
        self.delete_button.on_click(self._on_delete)
        actions = widgets.HBox([self.edit_button, self.reason, self.delete_button])
        super().__init__(children=[self.text, actions, self.editor, self.status])
        self.add_class("dt-memory-entry")

    def _on_edit(self, _button: widgets.Button | None = None) -> None:
        self.edit_text.value = self.entry.text
        self.status.value = ""
        _show(self.editor, True)

    def _on_save(self, _button: widgets.Button | None = None) -> None:
        problem = self._on_save_cb(self.entry, self.edit_text.value)
        if problem:
            text = Texts("memory", self.language)["not_saved"].format(reason=problem)
            self.status.value = message_html(text, error=True)

    def _on_reason(self, change: Mapping[str, Any]) -> None:
        self.delete_button.disabled = not change["new"]

    def _on_delete(self, _button: widgets.Button | None = None) -> None:
        # Button.click() from code ignores ``disabled``: no reason, no delete.
        if not self.reason.value:
            return
        problem = self._on_delete_cb(self.entry, str(self.reason.value))
        if problem:
            text = Texts("memory", self.language)["not_deleted"].format(reason=problem)
            self.status.value = message_html(text, error=True)


class MemoryWorkbench(TextFallback, widgets.VBox):  # type: ignore[misc]
    """Pick a document, read it with provenance, fix entries, preview and apply consolidation."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        make_model: Callable[[], ChatModel] | None = None,
        language: str = "en",
        settings: Callable[[], ResolvedSettings] | None = None,
    ) -> None:
        self.store, self.make_model, self.language = store, make_model, language
        self.settings = settings  # the learner's settings, read again at each refresh
        self.task: asyncio.Task[None] | None = None  # the last preview run, for awaiting
        self._in_flight = False
        self.preview: Preview | None = None
        self.entry_rows: list[EntryRow] = []
        self._loop = _running_loop()
        s = self._s = Texts("memory", language)

        self.picker = widgets.Dropdown(description=s["document"])
        self.status = widgets.HTML()
        self.document = widgets.Output(layout=widgets.Layout(width="100%"))
        self.document.add_class("dt-memory-document")
        self.rows = widgets.VBox()
        self.raw_toggle = widgets.ToggleButton(description=s["raw"], value=False)
        self.raw_text = widgets.Textarea(layout=widgets.Layout(width="100%", height="16em"))
        self.raw_save = widgets.Button(description=s["save"], button_style="primary")
        self.raw_box = widgets.VBox([self.raw_text, self.raw_save])
        _show(self.raw_box, False)

        self.mode = widgets.Dropdown(
            options=[(s[f"mode_{m}"], m) for m in MODES], value="update", description=s["mode"]
        )
        self.preview_button = widgets.Button(description=s["preview"], icon="eye")
        self.apply_button = widgets.Button(
            description=s["apply"], button_style="primary", disabled=True
        )
        self.consolidation_note = widgets.HTML(
            f'<div style="{_SMALL}">{html.escape(s["preferences_off"])}</div>'
        )
        self.consolidation_status = widgets.HTML()
        self.diff = widgets.HTML()
        self.diff.add_class("dt-memory-diff")
        self.rejected = widgets.HTML()

        self.picker.observe(self._on_pick, names="value")
        self.raw_toggle.observe(self._on_raw_toggle, names="value")
        self.raw_save.on_click(self._on_raw_save)
        self.mode.observe(lambda _c: self._clear_preview(), names="value")
        self.preview_button.on_click(self._on_preview)
        self.apply_button.on_click(self._on_apply)
        consolidation = widgets.VBox(
            [
                widgets.HBox([self.mode, self.preview_button, self.apply_button]),
                self.consolidation_note,
                self.consolidation_status,
                self.diff,
                self.rejected,
            ]
        )
        # A checkbox is 300px wide by default and cuts its label off with an ellipsis.
        self.auto_toggle = widgets.Checkbox(
            value=False, indent=False, layout=widgets.Layout(width="auto", max_width="100%")
        )
        self.auto_toggle.add_class("dt-memory-auto")
        self.auto_status = widgets.HTML()
        self.auto_status.add_class("dt-memory-auto-status")
        self.auto_message = widgets.HTML()
        self.auto_toggle.observe(self._on_auto, names="value")
        background = widgets.VBox(
            [
                widgets.HTML(f"<b>{html.escape(s['auto_title'])}</b>"),
                self.auto_toggle,
                self.auto_status,
                self.auto_message,
            ]
        )
        _show(background, settings is not None)
        header = widgets.HTML(f"<h4>{html.escape(s['title'])}</h4>")
        top = widgets.HBox([self.picker, self.raw_toggle])
        children = [header, top, self.status, self.raw_box, self.document, self.rows]
        super().__init__(children=[*children, consolidation, background])
        self.add_class("dt-memory")
        self.refresh()

    def fallback_markdown(self) -> str:
        """What a saved notebook shows: the documents and their sizes, not what they say.

        A notebook gets shared; what the tutor remembers about the learner stays in
        ``$DEEPTUTOR_HOME`` unless they copy it out themselves.
        """
        s = self._s
        lines = [f"**{s['title']}**", "", s["fallback"], ""]
        for key in document_keys(self.store):
            lines.append(f"- {self._choice_label(key)}")
        if self.settings is not None:
            state = s["fallback_on"] if self.auto_toggle.value else s["fallback_off"]
            lines += ["", s["fallback_auto"].format(state=state)]
        return "\n".join(lines) + "\n"

    def _choice_label(self, key: DocKey) -> str:
        count = self._count(len(self.store.read(*key).entries()), "entry", "entries_word")
        return self._s["entries"].format(name=doc_title(key, self.language), count=count)

    def _count(self, n: int, one: str, many: str) -> str:
        """``1 entry``, ``2 entries`` (the strings table has both forms per language)."""
        return f"{n} {self._s[one] if n == 1 else self._s[many]}"

    @property
    def selected(self) -> DocKey:
        value: DocKey = self.picker.value
        return value

    # showing -------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Re-read the store: picker counts, the document, its rows, raw text, controls."""
        self._load_choices()
        key = self.selected
        doc = self.store.read(*key)
        traces = {record.trace_id: record for record in self.store.traces()}
        self.document.outputs = (markdown_bundle(display_markdown(doc, self.language, traces)),)
        pairs = doc.entries()
        self.entry_rows = [
            EntryRow(
                entry,
                provenance(entry.refs, traces, self.language),
                language=self.language,
                on_save=self._save_entry,
                on_delete=self._delete_entry,
            )
            for _, entry in pairs[:ROW_LIMIT]
        ]
        more: list[widgets.Widget] = []
        if len(pairs) > ROW_LIMIT:
            note = self._s["more_rows"].format(shown=ROW_LIMIT, total=len(pairs))
            more = [widgets.HTML(f'<div style="{_SMALL}">{html.escape(note)}</div>')]
        self.rows.children = [*self.entry_rows, *more]
        self.raw_text.value = self.store.read_text(*key)
        self._sync_controls()
        self.refresh_background()

    def refresh_background(self) -> None:
        """The checkbox and the last run, from settings.toml and memory/consolidation.jsonl."""
        if self.settings is None:
            return
        resolved = self.settings()
        every = resolved.settings.consolidate_every
        # Showing the state is not the learner switching it: no write.
        self.auto_toggle.unobserve(self._on_auto, names="value")
        self.auto_toggle.value = resolved.settings.auto_consolidate
        self.auto_toggle.description = self._s["auto_toggle"].format(every=every)
        self.auto_toggle.observe(self._on_auto, names="value")
        text, failed = background_summary(resolved, RunLog(self.store.root).last(), self.language)
        style = _ERROR if failed else _SMALL
        self.auto_status.value = f'<div style="{style}">{html.escape(text)}</div>'

    def _on_auto(self, change: Mapping[str, Any]) -> None:
        from deeptutor_jupyter.config import SettingsFileError, write_settings

        assert self.settings is not None
        wanted = bool(change["new"])
        try:
            write_settings({"auto_consolidate": wanted}, home=self.settings().settings.home)
        except (SettingsFileError, OSError) as exc:
            text = self._s["auto_not_saved"].format(reason=str(exc))
            self.auto_message.value = message_html(text, error=True)
            self.refresh_background()
            return
        resolved = self.settings()
        if resolved.settings.auto_consolidate != wanted:
            source = resolved.sources.get("auto_consolidate", "")
            text = self._s["auto_overridden"].format(source=source)
            self.auto_message.value = message_html(text, error=True)
        else:
            text = self._s["auto_saved_on" if wanted else "auto_saved_off"]
            self.auto_message.value = message_html(text)
        self.refresh_background()

    def _load_choices(self) -> None:
        keys = document_keys(self.store)
        current = self.picker.value if self.picker.value in keys else keys[0]
        options = [(self._choice_label(k), k) for k in keys]
        # Counts change after every write; re-listing must not count as the learner picking.
        self.picker.unobserve(self._on_pick, names="value")
        self.picker.options = options
        self.picker.value = current
        self.picker.observe(self._on_pick, names="value")

    def _on_pick(self, _change: Mapping[str, Any]) -> None:
        self.status.value = ""
        self._clear_preview()
        self.refresh()

    def _say(self, text: str, *, error: bool = False) -> None:
        self.status.value = message_html(text, error=error)

    # entry and raw edits -------------------------------------------------------------------
    def _save_entry(self, entry: Entry, text: str) -> str:
        op = {"op": "edit", "id": f"m_{entry.id}", "text": text, "refs": entry.refs}
        result = self.store.apply_ops(*self.selected, [op])
        if result.rejected:
            # An edit must keep a citation; a hand-added line has none to keep.
            return self._s["edit_in_raw"] if not entry.refs else result.rejected[0][1]
        self._after_write(self._s["saved"].format(name=doc_title(self.selected, self.language)))
        return ""

    def _delete_entry(self, entry: Entry, reason: str) -> str:
        try:
            self.store.delete_entry(*self.selected, f"m_{entry.id}", cast(DeleteReason, reason))
        except KeyError as exc:
            return str(exc.args[0]) if exc.args else str(exc)
        name = doc_title(self.selected, self.language)
        self._after_write(self._s["deleted"].format(id=entry.id, reason=reason, name=name))
        return ""

    def _on_raw_toggle(self, change: Mapping[str, Any]) -> None:
        if change["new"]:
            self.raw_text.value = self.store.read_text(*self.selected)
        _show(self.raw_box, bool(change["new"]))

    def _on_raw_save(self, _button: widgets.Button | None = None) -> None:
        try:
            self.store.overwrite(*self.selected, self.raw_text.value)
        except DocumentError as exc:
            items = "".join(f"<li>{html.escape(p)}</li>" for p in exc.problems)
            title = html.escape(self._s["raw_invalid"])
            self.status.value = f'<div style="{_ERROR}">{title}<ul>{items}</ul></div>'
            return
        self._after_write(self._s["saved"].format(name=doc_title(self.selected, self.language)))

    def _after_write(self, message: str) -> None:
        self._clear_preview()
        self.refresh()
        self._say(message)

    # consolidation -------------------------------------------------------------------------
    def _sync_controls(self) -> None:
        preferences = self.selected == ("L3", "preferences")
        running = self._in_flight
        # The document stays put while a preview runs: its result belongs to that document.
        self.picker.disabled = running
        self.mode.disabled = self.preview_button.disabled = running or preferences
        ready = self.preview is not None and self.preview.has_work()
        self.apply_button.disabled = running or preferences or not ready
        _show(self.consolidation_note, preferences)

    def _clear_preview(self) -> None:
        self.preview = None
        self.diff.value = self.rejected.value = self.consolidation_status.value = ""
        self._sync_controls()

    def _say_run(self, text: str, *, error: bool = False) -> None:
        self.consolidation_status.value = message_html(text, error=error)

    def _model(self, mode: str) -> tuple[ChatModel | None, str]:
        if mode not in MODEL_MODES:
            return None, ""
        if self.make_model is None:
            return None, self._s["no_model"].format(mode=mode)
        try:
            return self.make_model(), ""
        except Exception as exc:  # a broken setting must read as a message, not a traceback
            return None, self._s["model_failed"].format(reason=f"{type(exc).__name__}: {exc}")

    def _on_preview(self, _button: widgets.Button | None = None) -> None:
        key, mode = self.selected, str(self.mode.value)
        if self._in_flight or key == ("L3", "preferences"):
            return
        model, problem = self._model(mode)
        if problem:
            return self._say_run(problem, error=True)
        loop = self._loop or _running_loop()
        if loop is None:
            return self._say_run(self._s["no_loop"], error=True)
        self._clear_preview()
        if _running_loop() is loop:
            self._start(key, mode, model)
        else:  # a click handled on a kernel subshell thread: tasks belong to the kernel loop
            loop.call_soon_threadsafe(self._start, key, mode, model)

    def _start(self, key: DocKey, mode: str, model: ChatModel | None) -> None:
        if self._in_flight:  # two clicks queued from a subshell thread
            return
        self._in_flight = True
        self.task = asyncio.get_running_loop().create_task(self._run_preview(key, mode, model))
        running = html.escape(self._s["running"])
        self.consolidation_status.value = f'<div style="{_SMALL}">{running}</div>'
        self._sync_controls()

    async def _run_preview(self, key: DocKey, mode: str, model: ChatModel | None) -> None:
        try:
            self._show_preview(await self._preview(key, mode, model))
        except RunBusyError:
            self._say_run(self._s["busy"], error=True)
        except Exception as exc:  # shown in the widget: a task's exception is otherwise lost
            reason = f"{type(exc).__name__}: {exc}"
            self._say_run(self._s["failed"].format(reason=reason), error=True)
        finally:
            self._in_flight = False
            self._sync_controls()

    async def _preview(self, key: DocKey, mode: str, model: ChatModel | None) -> Preview:
        before = self.store.read_text(*key)
        unseen = self._unseen(key) if mode == "update" else []
        layer, name = key
        result = await consolidate(
            self.store, model, layer=layer, key=name, mode=cast(Mode, mode), apply=False
        )
        return Preview(key, mode, before, result, unseen)

    def _show_preview(self, preview: Preview) -> None:
        result = preview.result
        self.preview = preview
        self.diff.value = diff_html(result.diff) if result.diff else ""
        self.rejected.value = rejected_html(self._s["rejected"], result.rejected)
        summary = self._s["proposed"].format(
            ops=self._count(len(result.ops_applied), "op", "ops"),
            rejected=len(result.rejected),
            traces=self._count(result.traces_seen, "trace", "traces"),
        )
        self._say_run(summary if result.diff else f"{summary} {self._s['no_change']}")

    def _unseen(self, key: DocKey) -> list[str]:
        seen = self.store.seen_traces(*key)
        surface = key[1] if key[0] == "L2" else None
        return [r.trace_id for r in self.store.traces(surface) if r.trace_id not in seen]

    def _on_apply(self, _button: widgets.Button | None = None) -> None:
        preview = self.preview
        if preview is None or self._in_flight or not preview.has_work():
            return
        applied = OpsPreview()
        try:
            with self.store.run_lock(*preview.key):
                if self.store.read_text(*preview.key) != preview.before:
                    return self._say_run(self._s["stale_preview"], error=True)
                if preview.result.ops_applied:
                    applied = self.store.apply_ops(*preview.key, preview.result.ops_applied)
                if preview.marks_seen():
                    self.store.mark_seen(*preview.key, preview.unseen)
        except BlockingIOError:
            return self._say_run(self._s["busy"], error=True)
        self._clear_preview()
        self.refresh()
        name = doc_title(preview.key, self.language)
        ops = self._count(len(applied.valid), "op", "ops")
        self._say_run(self._s["applied"].format(ops=ops, name=name))
        self.rejected.value = rejected_html(self._s["apply_rejected"], applied.rejected)
