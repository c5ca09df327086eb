"""Output bundles; each carries a readable text fallback for a notebook saved without widgets.

Every bundle the tutor shows is built here, and scrubbed of the keys (redact.py) as it is built:
a question or a typed answer holding the key must not reach the saved notebook.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.redact import clean

if TYPE_CHECKING:
    from deeptutor_jupyter.agent.events import Event, UserInputRequired, UserInputResolved

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def show_markdown(text: str) -> None:
    from IPython.display import display

    text = clean(text)
    display({"text/markdown": text, "text/plain": text}, raw=True)  # type: ignore[no-untyped-call]


# Marks the tutor's own widget outputs for the sidebar extension (labextension/src/displays.ts):
# after a kernel restart their widgets are dead and it shows their Markdown fallback instead; and
# after a page reload, when JupyterLab no longer knows a display id, it still applies the
# ``update_display_data`` of that id (a turn's final answer and trace) to the saved output.
VIEW_MIME = "application/vnd.deeptutor.view+json"


def widget_bundle(widget: Any, markdown: str, display_id: str | None = None) -> dict[str, Any]:
    return {
        WIDGET_MIME: {"model_id": widget.model_id, "version_major": 2, "version_minor": 0},
        **view_bundle(markdown, display_id),
    }


def view_bundle(markdown: str, display_id: str | None = None) -> dict[str, Any]:
    """A tutor view's Markdown and marker without its widget: what a kernel's first turn shows
    until its widget is built, once its request has left (kernel/start.py)."""
    view: dict[str, Any] = {"fallback": "text/markdown"}
    if display_id is not None:
        view["display_id"] = display_id
    markdown = clean(markdown)
    return {VIEW_MIME: view, "text/markdown": markdown, "text/plain": markdown}


def static_bundle(
    markdown: str, display_id: str | None = None, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A finished output: the Markdown rendered as HTML, once, and no widget view.

    A widget needs its model, which dies with the kernel: a reopened notebook showed "Error
    displaying widget: model not found" where the answer was (issue 20). Every frontend
    (JupyterLab, Notebook 7, nbconvert, GitHub, VS Code) renders ``text/html``, LaTeX included
    (left as ``$...$`` for MathJax). The text is carried once (issue 28: Markdown, HTML and plain
    text each held a whole answer, 3.35x its bytes): ``text/plain`` only names the output, and no
    ``text/markdown``, since JupyterLab ranks the trace card (labextension/src/mime.ts) above
    Markdown and would show it instead of the answer. The marker keeps the display id, so the
    sidebar extension can still apply a late ``update_display_data`` to this output after a
    reload. ``extra`` adds more types (a turn's trace bundle).
    """
    view: dict[str, Any] = {"static": True}
    if display_id is not None:
        view["display_id"] = display_id
    markdown = clean(markdown)
    bundle = {
        "text/html": markdown_html(markdown),
        "text/plain": plain_pointer(markdown),
        VIEW_MIME: view,
    }
    return {**bundle, **clean(extra or {})}


POINTER_CHARS = 100


def plain_pointer(markdown: str) -> str:
    """A short plain-text name for a static output (its first line), not a second copy."""
    first = next((line.strip() for line in markdown.splitlines() if line.strip()), "")
    first = re.sub(r"[*_`]", "", first)
    if len(first) > POINTER_CHARS:
        first = first[: POINTER_CHARS - 1] + "…"
    return f"{first} [DeepTutor: the full text is this output's HTML]"


# $$display$$ first, then $inline$ (not $ followed by a space or a digit run like "$5 and $6").
_MATH = re.compile(
    r"\$\$.+?\$\$|\\\[.+?\\\]|\\\(.+?\\\)|(?<![\\$])\$(?![\s$])[^$\n]+?(?<![\s\\])\$", re.DOTALL
)


def markdown_html(markdown: str) -> str:
    """Markdown as HTML for a saved notebook; LaTeX stays ``$...$`` for MathJax to typeset.

    Math is cut out before the Markdown parser sees it (``a_1 * b_1`` would become emphasis)
    and put back escaped. Raw HTML in the text is escaped, never passed through: the answer
    comes from a model.
    """
    import mistune

    maths: list[str] = []

    def hide(match: re.Match[str]) -> str:
        maths.append(match.group(0))
        return f"DTMATH{len(maths) - 1}X"

    hidden = _fenced_aware_sub(markdown, hide)
    render = mistune.create_markdown(escape=True, plugins=["strikethrough", "table"])
    body = str(render(hidden))
    body = re.sub(r"DTMATH(\d+)X", lambda m: html.escape(maths[int(m.group(1))]), body)
    # Leaner, for the same page (issue 28: the final update is the turn's largest message):
    # no line break between tags (text is escaped, so ">\n<" is only ever between tags, where
    # HTML ignores it) and no language class on code, which no renderer here highlights.
    body = _CODE_CLASS.sub("<code>", _BETWEEN_TAGS.sub(">", body))
    return f'<div class="dt-static">{body}</div>'


_BETWEEN_TAGS = re.compile(r">\n(?=<)")
_CODE_CLASS = re.compile(r'<code class="language-[^"<>]*">')


def _fenced_aware_sub(markdown: str, hide: Callable[[re.Match[str]], str]) -> str:
    """Hide math everywhere except in code (fences and inline code keep their dollars)."""
    parts = re.split(r"(```.*?(?:```|$)|~~~.*?(?:~~~|$)|`[^`\n]+`)", markdown, flags=re.DOTALL)
    return "".join(p if i % 2 else _MATH.sub(hide, p) for i, p in enumerate(parts))


_NOT_ANSWERED = {
    "timeout": "not answered in time",
    "turn_stopped": "the turn was stopped before an answer",
}


def asked_from_events(events: Iterable[Event]) -> list[dict[str, str]]:
    """Each ``ask_user`` question of a turn with the answer given, as ``{title, answer}``.

    Built from the turn's ``user_input_required`` / ``user_input_resolved`` events
    (agent/events.py); option ids become their labels, free text stays verbatim. A question
    still waiting has an empty answer. Pass every event of the turn, the saved ones before a
    resume included, so each answer finds its question's option labels.
    """
    return [a for a in asked_by_id(events).values() if a["title"] or a["answer"]]


def asked_by_id(events: Iterable[Event]) -> dict[str, dict[str, str]]:
    """:func:`asked_from_events` keyed by request id."""
    from deeptutor_jupyter.agent.events import UserInputRequired, UserInputResolved

    asked: dict[str, dict[str, str]] = {}
    questions: dict[str, UserInputRequired] = {}
    for event in events:
        match event.body:
            case UserInputRequired(id=request_id, title=title) as question:
                questions[request_id] = question
                asked[request_id] = {"title": title, "answer": ""}
            case UserInputResolved(id=request_id) as answer:
                entry = asked.setdefault(request_id, {"title": "", "answer": ""})
                entry["answer"] = _answer_text(questions.get(request_id), answer)
    return asked


def _answer_text(question: UserInputRequired | None, answer: UserInputResolved) -> str:
    if answer.cancelled:
        return "_" + _NOT_ANSWERED.get(answer.reason, "cancelled") + "_"
    options = question.options if question is not None else []
    labels = {o.id: o.label or o.id for o in options}
    parts = [labels.get(s, s) for s in answer.selections]
    if answer.custom_input:
        parts.append(answer.custom_input if not parts else f"other: {answer.custom_input}")
    if not parts and question is not None and question.mode in ("single", "multiple", "toggle"):
        return "_none of the options_"
    return ", ".join(parts)


def asked_markdown(asked: list[dict[str, str]]) -> list[str]:
    lines: list[str] = []
    for item in asked:
        title = item.get("title") or "A question"
        answer = item.get("answer") or "_not answered yet_"
        # A multi-line free-text answer stays inside the quote.
        quoted = answer.replace("\n", "\n> ")
        lines += [f"> **Tutor asked:** {title}", ">", f"> **You answered:** {quoted}", ""]
    return lines


def turn_markdown(
    question: str,
    answer: str,
    *,
    model: str,
    status: str,
    tools: list[str],
    error: str = "",
    asked: list[dict[str, str]] | None = None,
    tool_cards: list[tuple[str, str, bool]] | None = None,
) -> str:
    """The turn as a saved notebook shows it on GitHub or nbviewer, with no kernel.

    ``asked`` lists the ``ask_user`` questions and the learner's answers
    (see :func:`asked_from_events`), so a reader knows what the answer builds on.
    ``tool_cards`` (name, one-line result, failed), when known, replace the bare tool names
    with the compact cards the live view showed (:func:`tool_cards_from_events`).
    """
    lines = [f"**You:** {question}", ""]
    if tool_cards:
        lines += [_tool_line(*card) for card in tool_cards] + [""]
    elif tools:
        lines += ["_Tools used: " + ", ".join(tools) + "_", ""]
    if asked:
        lines += asked_markdown(asked)
    if answer:
        lines += [f"**Tutor** ({model}):", "", answer, ""]
    if error:
        lines += [f"> ⚠ {error}", ""]
    if status == "cancelled":
        lines += ["_Stopped before the answer was finished._"]
    elif status == "running":
        lines += ["_The tutor is answering… (open this notebook with a running kernel to see it)_"]
    return "\n".join(lines).rstrip() + "\n"


def _tool_line(name: str, summary: str, failed: bool) -> str:
    words = " ".join(summary.split())
    if len(words) > 120:
        words = words[:119] + "…"
    # Words, not an emoji mark: without an emoji font it showed as an empty box.
    head = f"- ⚠ Tool `{name}` failed" if failed else f"- Tool `{name}`"
    return head + (f" · {words}" if words else "")


# Tools whose result the static rendering shows in its own way (the questions, the quiz receipt).
_SHOWN_ELSEWHERE = frozenset({"ask_user", "make_quiz"})


def tool_cards_from_events(events: Iterable[Event]) -> list[tuple[str, str, bool]]:
    """The turn's tool calls as (name, one-line summary, failed), in the order they ran."""
    return list(tool_cards_by_id(events).values())


def tool_cards_by_id(events: Iterable[Event]) -> dict[str, tuple[str, str, bool]]:
    from deeptutor_jupyter.agent.events import ToolCallFinished, ToolCallStarted

    cards: dict[str, list[Any]] = {}
    for event in events:
        body = event.body
        if body.explore:
            continue
        match body:
            case ToolCallStarted(id=call_id, name=name) if name not in _SHOWN_ELSEWHERE:
                cards[call_id] = [name, "", False]
            case ToolCallFinished(id=call_id) if call_id in cards:
                cards[call_id][1:] = [body.summary or "", body.is_error]
    return {i: (str(n), str(s), bool(f)) for i, (n, s, f) in cards.items()}


def transcript_markdown(events: Iterable[Event]) -> list[str]:
    """The turn's body as Markdown blocks in the order the live view showed them: text the
    tutor wrote, tool cards, each question with the learner's answer, each quiz's receipt. A
    line written before a question stays before it."""
    from deeptutor_jupyter.agent.events import (
        Content,
        QuizRequired,
        ToolCallStarted,
        UserInputRequired,
    )

    events = list(events)
    cards = tool_cards_by_id(events)
    asked = asked_by_id(events)
    receipts = quiz_receipts_by_id(events)
    blocks: list[str] = []
    run: list[str] = []
    tools: list[str] = []  # consecutive tool cards are one list
    shown: set[str] = set()  # a question shown again after a resume is told once

    def flush() -> None:
        if text := "".join(run).strip():
            blocks.append(text)
        run.clear()
        if tools:
            blocks.append("\n".join(tools))
            tools.clear()

    for event in events:
        body = event.body
        if body.explore:
            continue
        match body:
            case Content(text=text):
                if tools:
                    flush()
                run.append(text)
            case ToolCallStarted(id=call_id) if call_id in cards:
                if run:
                    flush()
                tools.append(_tool_line(*cards[call_id]))
            case ToolCallStarted():
                flush()  # ask_user / make_quiz: their question or quiz follows
            case UserInputRequired(id=request_id) if request_id not in shown:
                shown.add(request_id)
                flush()
                blocks.append("\n".join(asked_markdown([asked[request_id]])).rstrip())
            case QuizRequired(id=quiz_id) if quiz_id not in shown:
                shown.add(quiz_id)
                flush()
                blocks.append(receipts[quiz_id])
    flush()
    return blocks


def quiz_receipts_by_id(events: Iterable[Event]) -> dict[str, str]:
    """Each quiz of the turn as Markdown by its id: graded (answers, right or wrong, feedback,
    score), not submitted, or still open. From the events, so a quiz answered in another
    notebook or before a resume is in the saved file too."""
    from deeptutor_jupyter.agent.events import QuizRequired, QuizResolved
    from deeptutor_jupyter.kernel.widgets import quiz_card
    from deeptutor_jupyter.learning.quiz import QuizOutcome

    bodies: dict[str, dict[str, Any]] = {}
    results: dict[str, QuizOutcome] = {}
    for event in events:
        match event.body:
            case QuizRequired(id=quiz_id) as quiz:
                bodies[quiz_id] = quiz.model_dump(mode="json", exclude={"type", "explore"})
            case QuizResolved(id=quiz_id) as graded:
                results[quiz_id] = graded.outcome
    return {
        quiz_id: quiz_card.receipt_markdown(body, results[quiz_id])
        if quiz_id in results
        else quiz_card.form_markdown(body)
        for quiz_id, body in bodies.items()
    }


def streamed_answer(events: Iterable[Event]) -> str:
    """All the answer text the live view showed, runs split where a tool card or a question
    stood: ``Done.answer`` holds only the last round (and nothing for a stopped turn)."""
    from deeptutor_jupyter.agent.events import (
        Content,
        QuizRequired,
        ToolCallStarted,
        UserInputRequired,
    )

    runs: list[list[str]] = [[]]
    for event in events:
        body = event.body
        if body.explore:
            continue
        if isinstance(body, Content):
            runs[-1].append(body.text)
        elif isinstance(body, ToolCallStarted | UserInputRequired | QuizRequired) and runs[-1]:
            runs.append([])
    return "\n\n".join(text for run in runs if (text := "".join(run).strip()))
