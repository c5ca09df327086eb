"""Output bundles; each carries a readable text fallback for a notebook saved without widgets."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.agent.events import Event, UserInputRequired, UserInputResolved

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def show_markdown(text: str) -> None:
    from IPython.display import display

    display({"text/markdown": text, "text/plain": text}, raw=True)  # type: ignore[no-untyped-call]


def plural(count: int, one: str, many: str) -> str:
    """``1 entry``, ``2 entries``: English counts read as words, not ``entry(s)``."""
    return f"{count} {one if count == 1 else many}"


# Marks the tutor's own widget outputs for the sidebar extension (labextension/src/displays.ts):
# after a kernel restart their widgets are dead and it shows their Markdown fallback instead; and
# after a page reload, when JupyterLab no longer knows a display id, it still applies the
# ``update_display_data`` of that id (a turn's final answer and trace) to the saved output.
VIEW_MIME = "application/vnd.deeptutor.view+json"


def widget_bundle(widget: Any, markdown: str, display_id: str | None = None) -> dict[str, Any]:
    view: dict[str, Any] = {"fallback": "text/markdown"}
    if display_id is not None:
        view["display_id"] = display_id
    return {
        WIDGET_MIME: {"model_id": widget.model_id, "version_major": 2, "version_minor": 0},
        VIEW_MIME: view,
        "text/markdown": markdown,
        "text/plain": markdown,
    }


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
    return [a for a in asked.values() if a["title"] or a["answer"]]


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


def _asked_markdown(asked: list[dict[str, str]]) -> list[str]:
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
) -> str:
    """The turn as a saved notebook shows it on GitHub or nbviewer, with no kernel.

    ``asked`` lists the ``ask_user`` questions and the learner's answers
    (see :func:`asked_from_events`), so a reader knows what the answer builds on.
    """
    lines = [f"**You:** {question}", ""]
    if tools:
        lines += ["_Tools used: " + ", ".join(tools) + "_", ""]
    if asked:
        lines += _asked_markdown(asked)
    if answer:
        lines += [f"**Tutor** ({model}):", "", answer, ""]
    if error:
        lines += [f"> ⚠ {error}", ""]
    if status == "cancelled":
        lines += ["_Stopped before the answer was finished._"]
    elif status == "running":
        lines += ["_The tutor is answering… (open this notebook with a running kernel to see it)_"]
    return "\n".join(lines).rstrip() + "\n"
