"""The quiz form of ``make_quiz`` and ``%tutor review``, and the graded receipt it becomes.

The card is built from the quiz's public view (learning/quiz.py ``public_view``): prompts,
option labels, units and starter code. The answers, references, rubrics, tests and explanations
stay in the kernel, so no widget state a browser can inspect gives them away before Submit.
After grading, the card shows each question with the learner's answer, right or wrong, and the
feedback with the explanation; :func:`receipt_markdown` is the same receipt for a saved notebook.

A click may arrive on a kernel subshell thread (DESIGN.md section 2): ``on_submit`` must hand its
work to the loop. A click locks the card until the owner calls a ``show_*`` method.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets

from deeptutor_jupyter.kernel.i18n import Texts
from deeptutor_jupyter.kernel.widgets.inline import inline_html
from deeptutor_jupyter.learning.quiz import QuizOutcome
from deeptutor_jupyter.redact import clean

OnSubmit = Callable[[dict[str, Any], float], None]

_SMALL = "font-size:85%;opacity:0.75"
# Marks every font has (emoji need a colour-emoji font, which many machines lack).
_RIGHT = '<b style="color:var(--jp-success-color1, #2e7d32)">✓</b>'
_WRONG = '<b style="color:var(--jp-error-color1, #c62828)">✗</b>'
_BLANK = '<b style="opacity:0.6">–</b>'
_ERROR = "color:var(--jp-error-color1, #c62828)"


def _html(value: str, *classes: str, math: bool = False) -> widgets.HTML:
    # Every text of the card passes here; a receipt repeats the learner's answers, and a key
    # typed into one must not stay in the widget state a notebook saves (redact.py).
    value = clean(value)
    w = widgets.HTMLMath(value) if math else widgets.HTML(value)
    for name in classes:
        w.add_class(name)
    return w


def _fit(width: str = "auto", **more: str) -> widgets.Layout:
    """Never wider than the output area (``width:100%`` plus the widget margin overflowed it)."""
    return widgets.Layout(width=width, max_width="100%", **more)


def _text(value: Any) -> str:
    return html.escape(str(value)).replace("\n", "<br>")


class QuizCard(widgets.VBox):  # type: ignore[misc]
    """One quiz: a form while open, a graded receipt once submitted."""

    def __init__(
        self,
        body: Mapping[str, Any],
        *,
        on_submit: OnSubmit | None = None,
        language: str = "en",
        **kwargs: Any,
    ) -> None:
        self.body = dict(body)
        self.language = language
        s = self.s = Texts("quiz", language)
        self.quiz_id = str(body.get("id") or "")
        self.tool_call_id = str(body.get("tool_call_id") or "")
        self.session_id = str(body.get("session_id") or "")
        self.questions = [dict(q) for q in body.get("questions") or [] if isinstance(q, Mapping)]
        self.on_submit = on_submit
        self.state = "open"
        # Set by whoever displays the card on its own (a review, %tutor pending): once graded,
        # that output becomes the static receipt (kernel/quiz_cards.py ``settle_display``).
        self.display_id: str | None = None
        self.slot: Any = None  # where a turn resumed under this card shows, if any
        self.controls: dict[str, Any] = {}
        self._opened = time.monotonic()
        title = _html(
            f"<b>{_text(s['quiz'].format(title=body.get('title') or ''))}</b>", "dt-quiz-title"
        )
        rows: list[Any] = [title]
        for number, q in enumerate(self.questions, 1):
            rows.append(self._question(number, q))
        self.error = _html("", "dt-quiz-error")
        self.submit_button = widgets.Button(description=s["submit"], button_style="primary")
        self.submit_button.add_class("dt-quiz-submit")
        self.submit_button.on_click(lambda _b: self.submit())
        # Submit with blanks asks first (docs/learning.md "Blanks"): go back, or submit anyway.
        self.confirm_text = _html("", "dt-quiz-confirm-text")
        self.back_button = widgets.Button(description=s["go_back"])
        self.back_button.add_class("dt-quiz-back")
        self.back_button.on_click(lambda _b: self.go_back())
        self.anyway_button = widgets.Button(description=s["submit_anyway"], button_style="warning")
        self.anyway_button.add_class("dt-quiz-anyway")
        self.anyway_button.on_click(lambda _b: self.submit(confirmed=True))
        self.confirm = widgets.HBox(
            [self.confirm_text, self.back_button, self.anyway_button],
            layout=_fit(display="none", flex_flow="row wrap", align_items="center"),
        )
        self.confirm.add_class("dt-quiz-confirm")
        kwargs.setdefault("layout", _fit())
        super().__init__(children=[*rows, self.error, self.confirm, self.submit_button], **kwargs)
        self.add_class("dt-quiz")

    def _question(self, number: int, q: Mapping[str, Any]) -> widgets.VBox:
        qid, kind = str(q.get("id")), str(q.get("kind"))
        prompt = _html(
            f"<b>{number}.</b> {inline_html(str(q.get('prompt', '')))}", "dt-quiz-prompt", math=True
        )
        control: Any
        if kind == "choice":
            options = [(str(o.get("label")), str(o.get("id"))) for o in q.get("options") or []]
            if q.get("multiple"):
                boxes = [widgets.Checkbox(description=label, indent=False) for label, _ in options]
                hint = _html(f'<div style="{_SMALL}">{self.s["tick_every"]}</div>')
                control = widgets.VBox([hint, *boxes])
                self.controls[qid] = ("multiple", boxes, [oid for _, oid in options])
            else:
                control = widgets.RadioButtons(options=options, value=None)
                self.controls[qid] = ("single", control, None)
        elif kind == "numeric":
            unit = str(q.get("unit") or "")
            words = self.s["a_number_in"].format(unit=unit) if unit else self.s["a_number"]
            control = widgets.Text(placeholder=words)
            self.controls[qid] = ("text", control, None)
            if unit:
                control = widgets.HBox([control, widgets.Label(unit)])
        elif kind == "code":
            # Tab indents in every front end (anywidget, imported here only: not at load_ext).
            from deeptutor_jupyter.kernel.widgets.code_box import CodeBox

            control = CodeBox(value=str(q.get("starter") or ""), layout=_fit(height="10em"))
            self.controls[qid] = ("text", control, None)
        else:
            control = widgets.Textarea(
                placeholder=self.s["your_answer_placeholder"], layout=_fit(height="5em")
            )
            self.controls[qid] = ("text", control, None)
        box = widgets.VBox([prompt, control], layout=_fit())
        box.add_class("dt-quiz-question")
        return box

    def answers(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for qid, (how, control, ids) in self.controls.items():
            if how == "single":
                out[qid] = [control.value] if control.value is not None else []
            elif how == "multiple":
                out[qid] = [oid for box, oid in zip(control, ids, strict=True) if box.value]
            else:
                out[qid] = str(control.value)
        return out

    def unanswered(self) -> int:
        """Questions left blank: nothing chosen, nothing typed, or the starter code unchanged."""
        starters = {str(q.get("id")): str(q.get("starter") or "").strip() for q in self.questions}
        blank = 0
        for qid, given in self.answers().items():
            text = "" if isinstance(given, list) else given.strip()
            if not given or (not isinstance(given, list) and text in ("", starters.get(qid))):
                blank += 1
        return blank

    def go_back(self) -> None:
        self.confirm.layout.display = "none"
        self.confirm_text.value = ""

    def submit(self, *, confirmed: bool = False) -> None:
        if self.state != "open" or self.on_submit is None:
            return
        asking = self.confirm.layout.display != "none"
        blank = self.unanswered()
        if blank and not (confirmed or asking):  # a second click on Submit is a "submit anyway"
            total = len(self.controls)
            counted = self.s["blanks_one" if total == 1 else "blanks_many"]
            self.confirm_text.value = (
                f"<b>{counted.format(blank=blank, total=total)}</b> {self.s['blanks_graded']} "
            )
            self.confirm.layout.display = "flex"
            return
        self.go_back()
        self.state = "submitted"
        self.submit_button.disabled = True
        self.submit_button.description = self.s["grading"]
        self.error.value = ""
        self.on_submit(self.answers(), time.monotonic() - self._opened)

    # what the owner says back --------------------------------------------------------------
    def show_error(self, message: str, *, final: bool = False) -> None:
        """A refused submission: fix and submit again, unless ``final``."""
        self.error.value = f'<div style="{_ERROR}">⚠ {_text(message)}</div>'
        self.state = "closed" if final else "open"
        self.submit_button.disabled = final
        self.submit_button.description = self.s["submit"]

    def show_receipt(self, result: QuizOutcome, *, where: str = "") -> None:
        """The graded card: answers, right or wrong, feedback with the explanation; ``where``
        the tutor goes on when its turn runs in another notebook."""
        self.state = "graded"
        text = receipt_html(self.body, result, self.language)
        if where:
            text += f"<div><i>{_text(self.s['continues_in'].format(where=where))}</i></div>"
        receipt = _html(text, "dt-quiz-receipt", math=True)
        self.children = (receipt,)

    def show_closed(self, words: str) -> None:
        self.state = "closed"
        self.children = (_html(f"<i>{_text(words)}</i>", "dt-quiz-receipt"),)


def _given_text(value: Any, question: Mapping[str, Any], s: Texts) -> str:
    if isinstance(value, list):
        labels = {str(o.get("id")): str(o.get("label")) for o in question.get("options") or []}
        return ", ".join(labels.get(str(v), str(v)) for v in value) or s["nothing_chosen"]
    return str(value) if str(value).strip() else s["no_answer"]


def receipt_html(body: Mapping[str, Any], result: QuizOutcome, language: str = "en") -> str:
    s = Texts("quiz", language)
    title = str(body.get("title") or "")
    if result.cancelled:
        words = s["timed_out" if result.reason == "timeout" else "was_closed"]
        return f"<i>{_text(words.format(title=title))}</i>"
    questions = {str(q.get("id")): q for q in body.get("questions") or []}
    score = s["score"].format(score=f"{result.score or 0.0:.0%}")
    parts = [f"<b>{_text(s['quiz'].format(title=title))} · {score}</b>"]
    for item in result.results:
        q = questions.get(item.id, {})
        blank = not item.answered
        mark = _BLANK if blank else _RIGHT if item.correct else _WRONG
        given = s["not_answered"] if blank else _given_text(item.given, q, s)
        code = q.get("kind") == "code" and not blank
        shown = f"<pre>{html.escape(given)}</pre>" if code else f"<i>{_text(given)}</i>"
        by = s["graded_by_tutor"]
        tutor = f' <span style="{_SMALL}">({by})</span>' if item.graded_by else ""
        prompt = inline_html(str(q.get("prompt", "")))
        parts.append(
            f'<div class="dt-quiz-result" style="margin:6px 0">{mark} {prompt}'
            f"{tutor}<br>{s['your_answer']} {shown}<br>"
            f'<span style="{_SMALL}">{inline_html(item.feedback)}</span></div>'
        )
    return "".join(parts)


def receipt_markdown(body: Mapping[str, Any], result: QuizOutcome) -> str:
    """The receipt as Markdown, for the saved notebook where widgets no longer render."""
    s = Texts("quiz", "en")
    title = str(body.get("title") or "Quiz")
    if result.cancelled:
        return f"**Quiz: {title}**: not submitted."
    questions = {str(q.get("id")): q for q in body.get("questions") or []}
    lines = [f"**Quiz: {title}** · score {result.score or 0.0:.0%}", ""]
    for item in result.results:
        q = questions.get(item.id, {})
        # Words beside marks every font has: emoji showed as empty boxes without an emoji font.
        blank = not item.answered
        mark = "– **not answered**" if blank else "✓ **right**" if item.correct else "✗ **wrong**"
        tutor = f" _({s['graded_by_tutor']})_" if item.graded_by else ""
        given = "(not answered)" if blank else _given_text(item.given, q, s)
        if q.get("kind") == "code" and not blank:  # the learner's own code, as they wrote it
            lines.append(f"- {mark} {q.get('prompt', '')}{tutor} — your answer:")
            fence = "~~~~" if "~~~" in given else "~~~"
            lines += ["", f"  {fence}python", *[f"  {c}" for c in given.splitlines()], f"  {fence}"]
        else:
            lines.append(f"- {mark} {q.get('prompt', '')}{tutor} — your answer: {given}")
        if item.feedback:  # its own paragraph of the item, not run on after the answer
            lines += ["", f"  {item.feedback}"]
    return "\n".join(lines)


def form_markdown(body: Mapping[str, Any]) -> str:
    """The open quiz as Markdown (no answers), for a notebook saved before submission."""
    lines = [f"**Quiz: {body.get('title') or ''}** (open the notebook with its kernel to answer)"]
    for number, q in enumerate(body.get("questions") or [], 1):
        lines.append(f"{number}. {q.get('prompt', '')}")
        for o in q.get("options") or []:
            lines.append(f"   - {o.get('label')}")
    return "\n".join(lines)
