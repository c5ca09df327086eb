"""The widget a turn streams into: status line, thinking, narration and tool cards, answer, Stop.

Everything the turn shows goes through widget state (docs/architecture.md, "Kernel facts"):
``print`` from a task gets lost or lands in the wrong cell. Updates are coalesced: events only
mark the view dirty and one flush per interval sends the accumulated text, so a long answer costs
a few dozen widget messages, not one per token.
"""

from __future__ import annotations

import asyncio
import contextvars
import html
import json
import math
import re
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from deeptutor_jupyter.agent.events import (
    Content,
    Done,
    ErrorEvent,
    Event,
    Notice,
    QuizRequired,
    QuizResolved,
    RoundStarted,
    Sources,
    Thinking,
    ToolCallFinished,
    ToolCallStarted,
    TurnEvent,
    TurnStarted,
    UserInputRequired,
    UserInputResolved,
)
from deeptutor_jupyter.kernel.i18n import t
from deeptutor_jupyter.kernel.widgets.lean import Lean

FLUSH_INTERVAL = 0.08  # seconds; about 12 updates a second reads as smooth streaming
TICK_INTERVAL = 1.0  # a retry's countdown; the clock itself is the browser's (status_line.py)
PREVIEW_CHARS = 2000


def unparented() -> contextvars.Context:
    """A copy of the current context in which the kernel's messages name no parent request.

    A turn's view streams long after the cell that asked has finished; every comm message of
    a flush or a tick still carried that cell's request header (~220 bytes, often more than
    the update itself; issue 28). JupyterLab and Notebook 7 (``KernelConnection`` of
    @jupyterlab/services) route comm messages by comm id, never by parent, so the view's own
    updates go without it. Only for widget traffic: a ``display`` needs its parent to find its
    cell.
    """
    ctx = contextvars.copy_context()
    from ipykernel.kernelbase import Kernel

    if Kernel.initialized():
        parent = getattr(Kernel.instance(), "_shell_parent", None)
        if isinstance(parent, contextvars.ContextVar):
            ctx.run(parent.set, {})
    return ctx


class LeanLayout(Lean, widgets.Layout):  # type: ignore[misc]
    pass


class KernelLayout(LeanLayout):
    """A Layout every turn's view shares: opened once a kernel, and never closed with a turn
    (kernel/release.py skips it). Two Layouts a turn were ~1.8 kB of opens and ~0.7 kB of
    closes (issue 28). Nothing sets its properties after it opens: every view would move."""

    kernel_wide = True


_KERNEL_LAYOUTS: dict[str, LeanLayout] = {}


def kernel_layout(name: str, **properties: str) -> widgets.Layout:
    layout = _KERNEL_LAYOUTS.get(name)
    if layout is None or layout.comm is None:  # none yet, or closed (``Widget.close_all()``)
        layout = _KERNEL_LAYOUTS[name] = KernelLayout(**properties)
    return layout


def markdown_bundle(text: str) -> dict[str, Any]:
    return {
        "output_type": "display_data",
        "data": {"text/markdown": text, "text/plain": text},
        "metadata": {},
    }


class _TextBlock:
    """One run of answer text, streamed append-only into one AnswerStream (answer_stream.py).

    Resending a growing text costs O(length x updates) bytes (issue 14: 148 MB for a 62 kB
    answer); cutting it into widget blocks still cost ~1.7 kB a block and the growing block
    again every second (issue 28: 3.7x the answer). Now each send carries only the text that
    is new. The first words open the widget with them (at once: a slow model's first token
    must not wait); then new text is sent when it has waited ``MAX_GAP`` seconds unshown, so
    a fast answer costs a message a second, not one per flush. ``sync(final=True)`` sends
    what is left.
    """

    MAX_GAP = 0.9  # seconds: text that arrived is shown within this (issue 28: 10 s gaps)

    def __init__(
        self,
        place: Callable[[widgets.Widget], None] | None = None,
        layout: widgets.Layout | None = None,
    ) -> None:
        self._place = place  # puts the widget in the view when it opens (with the first words)
        self._layout = layout or text_layout()
        self.widget: Any = None  # the AnswerStream, once there is text
        self.parts: list[str] = []
        self._joined = 0  # parts already in self._buf
        self._buf = ""
        self._sent = 0  # characters of _buf sent
        self._units = 0  # the same, in the browser's UTF-16 units
        self.shown_at = 0.0  # when text was last sent (the clock sync() is given)
        self.suffix = ""  # link definitions, so the [n] markers of the answer link to sources

    def link_sources(self, suffix: str) -> None:
        """The ``[n]: link`` definitions, which the front end puts under every block that
        cites (a Markdown rendering resolves only the definitions it holds itself)."""
        if re.search(r"\[\d+\]", self.text):
            self.suffix = suffix
            if self.widget is not None:
                self.widget.suffix = suffix

    @property
    def text(self) -> str:
        self._join()
        return self._buf

    def _join(self) -> None:
        if self._joined != len(self.parts):
            self._buf += "".join(self.parts[self._joined :])
            self._joined = len(self.parts)

    def sync(self, final: bool = True, now: float | None = None) -> None:
        """Send what is due: the first words at once, then new text once it has waited
        ``MAX_GAP`` seconds, and everything when final."""
        now = time.monotonic() if now is None else now
        self._join()
        if len(self._buf) == self._sent:
            return
        due = now - self.shown_at >= self.MAX_GAP
        if not (final or due or self.widget is None):
            return
        from deeptutor_jupyter.kernel.widgets.answer_stream import AnswerStream, utf16_len

        new = self._buf[self._sent :]
        if self.widget is None:
            # Opened with the text so far in its state: no separate first message.
            self.widget = AnswerStream(lambda: self.text, layout=self._layout, suffix=self.suffix)
            if self._place is not None:
                self._place(self.widget)
        else:
            self.widget.append(self._units, new)
        self._sent, self._units, self.shown_at = len(self._buf), self._units + utf16_len(new), now

    def due_in(self, now: float) -> float | None:
        """Seconds until text that arrived and is not shown yet is due; None: all is shown."""
        self._join()
        if len(self._buf) <= self._sent:
            return None
        return max(0.0, self.shown_at + self.MAX_GAP - now)


def text_layout() -> widgets.Layout:
    return kernel_layout("text", width="auto", max_width="100%")


class ToolCard(widgets.Accordion):  # type: ignore[misc]
    """A compact, collapsed card: name and state in the title, arguments and result inside."""

    def __init__(self, call_id: str, name: str, arguments: str, language: str) -> None:
        self.call_id = call_id
        self.tool_name = name
        self.language = language
        self.body = widgets.HTML(_args_html(arguments))
        super().__init__(children=[self.body], selected_index=None)
        self.add_class("dt-tool-card")
        self.titles = (f"{name} · {t('running', language)}",)
        self._arguments = arguments

    def finish(self, content: str, is_error: bool, summary: str) -> None:
        mark = "⚠" if is_error else "✓"
        words = summary or (
            t("tool_error", self.language) if is_error else t("done", self.language)
        )
        self.titles = (f"{mark} {self.tool_name} · {_one_line(words)}",)
        self.body.value = _args_html(self._arguments) + _result_html(content, is_error)


class TurnView(widgets.VBox):  # type: ignore[misc]
    def __init__(
        self,
        *,
        model_label: str,
        language: str = "en",
        on_stop: Callable[[], None] | None = None,
        make_card: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.language = language
        self.make_card = make_card
        self.cards: dict[str, Any] = {}  # ask_user request id -> its card
        self.make_quiz_card: Callable[[dict[str, Any]], Any] | None = None
        self._quiz_bodies: dict[str, dict[str, Any]] = {}
        self.quiz_receipts: list[str] = []  # Markdown, for the saved notebook
        self._answers: dict[str, tuple[UserInputResolved, float]] = {}
        self.model_label = model_label
        # Every widget opens with its whole state (a Layout alone is ~1.7 kB on the wire, and
        # as much again to close): the view's plain parts share one Layout with every other
        # turn's, get their classes and values at creation, and the thinking card and the
        # notes box only exist once needed (issue 28: ~53 kB a turn before any answer text).
        self._plain = kernel_layout("plain")
        self._text_layout = text_layout()
        self.thinking: widgets.Accordion | None = None
        self.thinking_text: widgets.HTML | None = None
        self.errors: widgets.VBox | None = None  # notices and error cards
        # Answer text, cards and sources, in order: the view's own children between the status
        # line (and thinking) and the notes, not a box of their own (a VBox is ~0.8 kB to open
        # and ~0.35 kB to close a turn).
        self.blocks: list[widgets.Widget] = []
        self._text: _TextBlock | None = None
        self._text_blocks: list[_TextBlock] = []
        self._thinking_parts: list[str] = []
        self._thinking_shown = 0
        self._thinking_sent = 0  # characters of thinking last sent
        self._cards: dict[str, ToolCard] = {}
        self._reading: widgets.Accordion | None = None
        self._reading_text: widgets.HTML | None = None
        self._reading_parts: list[str] = []
        self._round = 0
        self._phase = ""
        self._state = t("starting", language)
        self._retry_reason = ""
        self._retry_at = 0.0  # monotonic time of the announced retry; the status counts down
        self._started = time.monotonic()
        self._flush_handle: asyncio.TimerHandle | None = None
        # When text arrived and then the model paused (a slow model, a tool it is writing),
        # no event comes to flush it: this shows it when it is due (``_TextBlock.MAX_GAP``).
        self._due_handle: asyncio.TimerHandle | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._compacted = False
        self._status_key: tuple[Any, ...] = ()
        self._final = ""  # the finished turn's words on the status line
        self._ended = 0.0  # monotonic time the turn finished
        self.finished = False
        from deeptutor_jupyter.kernel.widgets.status_line import StatusLine

        # The line draws the Stop button while the turn runs (status_line.py); "dt-stop" names
        # the widget whose click stops the turn.
        self.status = StatusLine(
            self._status_html,
            on_stop=on_stop,
            stop=t("stop", language) if on_stop is not None else "",
            layout=self._plain,
            _dom_classes=("dt-status", "dt-stop"),
        )
        super().__init__(
            children=[self.status],
            layout=self._plain,
            _dom_classes=("dt-turn",),
        )

    # event intake ------------------------------------------------------------------------
    def handle(self, event: Event) -> None:
        body = event.body
        if body.explore:
            self._explore(body)
            return
        if isinstance(body, Content | Thinking | RoundStarted | ToolCallStarted | ErrorEvent):
            self._retry_at = 0.0
        match body:
            case Content(text=text):
                self._current_text().parts.append(text)
                self._state = t("answering", self.language)
                self._schedule()
            case Thinking(text=text):
                self._thinking_parts.append(text)
                self._state = t("thinking", self.language)
                self._schedule()
            case RoundStarted(round=number, phase=phase):
                self._round, self._phase = number, phase
                self._schedule()
            case ToolCallStarted(name="ask_user" | "make_quiz"):
                pass  # the form that follows is its card; a quiz's arguments hold its answers
            case ToolCallStarted():
                self._tool_card(body)
            case ToolCallFinished(id=call_id):
                if (done := self._cards.get(call_id)) is not None:
                    done.finish(body.content, body.is_error, body.summary)
            case QuizRequired():
                self._quiz_form(body)
            case QuizResolved():
                self._quiz_receipt(body)
            case UserInputRequired():
                self._question(body)
            case UserInputResolved():
                from deeptutor_jupyter.kernel.interactions import update_card

                self._answers[body.id] = (body, event.ts)
                if (form := self.cards.get(body.id)) is not None:
                    update_card(form, body)
                self._state = t("answering", self.language)
            case Notice(retry_in=float() as seconds):
                # A retry after a 429/5xx: the status line counts down instead of "starting…".
                self._retry_reason = body.reason or body.text
                self._retry_at = time.monotonic() + seconds
                self._render_status()
            case Notice(text=text, stage="policy"):
                # The instructor's policy in force, with where it comes from: a badge on top.
                self._note(_policy_badge(text), first=True)
            case Notice(text=text, stage=stage):
                if stage == "compacted":  # the history was summarised: said on the status
                    self._compacted = True
                    self._render_status()
                self._flush()
                self._note(_notice(text))
            case ErrorEvent():
                self._flush()
                self._note(error_card(body, self.language))
            case Done():
                unparented().run(self._finish, body)
            case TurnStarted() | Sources():
                pass  # the header says who answers; the sources come through show_sources

    def _note(self, widget: widgets.Widget, first: bool = False) -> None:
        """A notice, an error card or the policy badge, in the notes box under the answer."""
        if self.errors is None:
            self.errors = widgets.VBox([widget], layout=self._plain)
            self._show()
        elif first:
            self.errors.children = (widget, *self.errors.children)
        else:
            self.errors.children = (*self.errors.children, widget)

    def _tool_card(self, call: ToolCallStarted) -> None:
        self._flush()
        self._text = None  # text after a tool call starts a new block below the card
        card = ToolCard(call.id, call.name, call.arguments, self.language)
        self._cards[call.id] = card
        self._add_block(card)
        self._state = t("using_tool", self.language).format(name=call.name)

    def _question(self, question: UserInputRequired) -> None:
        self._flush()
        self._text = None
        if self.make_card is not None:
            form = self.make_card(question.model_dump(mode="json", exclude={"type", "explore"}))
            self.cards[question.id] = form
            self._add_block(form)
        self._state = t("waiting_for_answer", self.language)
        self._render_status()

    def _quiz_form(self, quiz: QuizRequired) -> None:
        """make_quiz: the form, built from the public view (the event never has the answers)."""
        self._flush()
        self._text = None
        if self.make_quiz_card is None:
            return  # a view without a kernel behind it cannot grade
        body = quiz.model_dump(mode="json", exclude={"type", "explore"})
        form = self.make_quiz_card(body)
        self.cards[quiz.id] = form
        self._quiz_bodies[quiz.id] = body
        self._add_block(form)
        self._state = t("waiting_for_answer", self.language)
        self._render_status()

    def _quiz_receipt(self, graded: QuizResolved) -> None:
        from deeptutor_jupyter.kernel.widgets import quiz_card

        body = self._quiz_bodies.get(graded.id, {})
        self.quiz_receipts.append(quiz_card.receipt_markdown(body, graded.outcome))
        form = self.cards.get(graded.id)
        if form is not None and form.state != "graded":
            form.show_receipt(graded.outcome)
        self._state = t("answering", self.language)

    def _explore(self, body: TurnEvent) -> None:
        """The attachment-reading pass goes into one collapsed card, apart from the answer."""
        if self._reading is None or self._reading_text is None:
            self._reading_text = widgets.HTML()
            self._reading = widgets.Accordion(children=[self._reading_text], selected_index=None)
            self._reading.add_class("dt-explore")
            self._reading.titles = (t("reading_attachments", self.language),)
            self._add_block(self._reading)
        match body:
            case Content(text=text):
                self._reading_parts.append(text)
            case ToolCallStarted(name=name, arguments=arguments):
                self._reading_parts.append(f"\n[{name} {arguments}]\n")
            case Notice(stage="end"):
                self._reading.titles = (t("read_attachments", self.language),)
        self._reading_text.value = _pre("".join(self._reading_parts))

    def show_sources(self, markdown: str) -> None:
        """Citations as Markdown links: JupyterLab opens a relative link as a file.

        The ``[n]: link`` definitions of kernel/turn_plan.py's ``sources_markdown`` also go
        under each answer block, which makes its ``[n]`` markers links.
        """
        if not markdown:
            return
        self._flush()
        definitions = "\n".join(re.findall(r"^\[\d+\]: .*$", markdown, flags=re.MULTILINE))
        for block in self._text_blocks:
            block.link_sources("\n\n" + definitions if definitions else "")
        box = widgets.Output()
        box.add_class("dt-sources")
        box.outputs = (markdown_bundle(markdown),)
        self._add_block(box)

    def start_ticker(self) -> None:
        loop = asyncio.get_running_loop()
        self._ticker = loop.create_task(self._tick(), context=unparented())

    # rendering ---------------------------------------------------------------------------
    def _current_text(self) -> _TextBlock:
        if self._text is None:
            self._text = _TextBlock(self._add_block, self._text_layout)
            self._text_blocks.append(self._text)
        return self._text

    def _add_block(self, widget: widgets.Widget) -> None:
        self.blocks.append(widget)
        self._show()

    def _show(self) -> None:
        parts = (self.status, self.thinking, *self.blocks, self.errors)
        self.children = tuple(w for w in parts if w is not None)

    def _schedule(self) -> None:
        if self._flush_handle is None:
            loop = asyncio.get_running_loop()
            self._flush_handle = loop.call_later(
                FLUSH_INTERVAL, self._flush, False, context=unparented()
            )

    def _flush(self, final: bool = True) -> None:
        for handle in (self._flush_handle, self._due_handle):
            if handle is not None:
                handle.cancel()
        self._flush_handle = self._due_handle = None
        if self._text is not None:
            self._text.sync(final)
            wait = None if final else self._text.due_in(time.monotonic())
            if wait is not None:
                loop = asyncio.get_running_loop()
                # A little late rather than early: a flush before the due time shows nothing.
                self._due_handle = loop.call_later(
                    wait + 0.02, self._flush, False, context=unparented()
                )
        if len(self._thinking_parts) != self._thinking_shown:
            text = "".join(self._thinking_parts)
            # Like the answer's active block: resent when grown by half, in full when final.
            if final or len(text) >= 1.5 * self._thinking_sent + 64:
                self._thinking_shown, self._thinking_sent = len(self._thinking_parts), len(text)
                self._show_thinking(_pre(text))
        if self._status_key != self._key():
            # Only when its words change, a final flush included: the clock is the browser's,
            # and the turn's end sends its own last line (issue 28: ~0.6 kB a turn).
            self._render_status()

    def _show_thinking(self, value: str) -> None:
        if self.thinking is None or self.thinking_text is None:
            self.thinking_text = widgets.HTML(value)
            self.thinking = widgets.Accordion(
                children=[self.thinking_text],
                selected_index=None,
                titles=(t("thinking", self.language),),
            )
            self._show()
        else:
            self.thinking_text.value = value

    def _key(self) -> tuple[Any, ...]:
        return (self._round, self._phase, self._state, self._retry_at)

    def _render_status(self) -> None:
        self._status_key = self._key()
        self.status.value = self._status_html()

    def _status_html(self) -> str:
        """The status line as of now; its clock runs on in the browser until the turn ends."""
        elapsed = (self._ended or time.monotonic()) - self._started
        bits = [f"<b>{html.escape(self.model_label)}</b>"]
        if self._round:
            phase = "" if self._phase in ("", "exploration") else f" ({self._phase})"
            bits.append(f"{t('round', self.language)} {self._round}{phase}")
        live = "" if self._final else " data-live"
        bits.append(f'<span class="dt-clock"{live}>{elapsed:.1f} s</span>')
        if self._compacted:
            bits.append(html.escape(t("compacted", self.language)))
        bits.append(self._final or html.escape(self._retry_status() or self._state))
        return '<span class="dt-status-line">' + " · ".join(bits) + "</span>"

    def _retry_status(self) -> str:
        left = self._retry_at - time.monotonic()
        if left <= 0:
            return ""
        return t("retrying_in", self.language).format(
            reason=self._retry_reason, seconds=math.ceil(left)
        )

    async def _tick(self) -> None:
        """A retry's countdown, and once more when it is over; the clock is the browser's."""
        while not self.finished:
            await asyncio.sleep(TICK_INTERVAL)
            if not self.finished and self._retry_at > time.monotonic() - TICK_INTERVAL:
                self._render_status()

    def _finish(self, done: Done) -> None:
        self.finished = True
        self._flush()
        # Receipts said "continuing…" while the turn ran; now it has finished.
        for request_id, (answer, ts) in self._answers.items():
            form = self.cards.get(request_id)
            if form is not None and form.state == "answered":
                form.show_receipt(list(answer.selections), answer.custom_input, ts, status="done")
        if self._ticker is not None:
            self._ticker.cancel()
        words = t(f"status_{done.status}", self.language)
        usage = done.usage
        if usage.get("total_tokens"):
            words += f" · {usage['total_tokens']:,} tokens"
        self._final, self._ended = words, time.monotonic()
        with self.status.hold_sync():  # the final words and no Stop: one message
            self.status.stop = ""
            self._render_status()

    @property
    def answer_text(self) -> str:
        return self._text.text if self._text is not None else ""


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def with_code(text: str) -> str:
    """Escaped text whose Markdown code spans (```%tutor config```) show as ``<code>``."""
    return _CODE_SPAN.sub(r"<code>\1</code>", html.escape(text))


def error_card(error: ErrorEvent, language: str = "en") -> widgets.HTML:
    hint = error.hint
    body = f"<b>{html.escape(t('error_title', language))}</b> {with_code(error.message)}"
    if hint:
        body += f"<br><b>{html.escape(t('how_to_fix', language))}</b> {with_code(hint)}"
    card = widgets.HTML(
        '<div style="border-left:4px solid #d9534f;padding:6px 10px;'
        f'background:rgba(217,83,79,0.08)">{body}</div>'
    )
    card.add_class("dt-error")
    return card


def _notice(text: str) -> widgets.HTML:
    w = widgets.HTML(f'<div style="opacity:0.7;font-size:90%">ℹ {html.escape(text)}</div>')
    w.add_class("dt-notice")
    return w


def _policy_badge(text: str) -> widgets.HTML:
    style = "display:inline-block;padding:1px 8px;border-radius:10px;font-size:85%;"
    style += "border:1px solid var(--jp-border-color1,#999)"
    w = widgets.HTML(f'<span style="{style}">{html.escape(text)}</span>')
    w.add_class("dt-policy")
    return w


def _pre(text: str) -> str:
    return f'<div style="white-space:pre-wrap;opacity:0.75;font-size:90%">{html.escape(text)}</div>'


def _args_html(arguments: str) -> str:
    try:
        pretty = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        pretty = arguments
    return f"<pre>{html.escape(_clip(pretty))}</pre>"


def _result_html(content: str, is_error: bool) -> str:
    color = "#d9534f" if is_error else "inherit"
    return f'<pre style="color:{color}">{html.escape(_clip(content))}</pre>'


def _clip(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + " …"


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 80 else line[:79] + "…"
