"""Output bundles; each carries a readable text fallback for a notebook saved without widgets."""

from __future__ import annotations

from typing import Any

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def show_markdown(text: str) -> None:
    from IPython.display import display

    display({"text/markdown": text, "text/plain": text}, raw=True)  # type: ignore[no-untyped-call]


def widget_bundle(widget: Any, markdown: str) -> dict[str, Any]:
    return {
        WIDGET_MIME: {"model_id": widget.model_id, "version_major": 2, "version_minor": 0},
        "text/markdown": markdown,
        "text/plain": markdown,
    }


def turn_markdown(
    question: str, answer: str, *, model: str, status: str, tools: list[str], error: str = ""
) -> str:
    """The turn as a saved notebook shows it on GitHub or nbviewer, with no kernel."""
    lines = [f"**You:** {question}", ""]
    if tools:
        lines += ["_Tools used: " + ", ".join(tools) + "_", ""]
    if answer:
        lines += [f"**Tutor** ({model}):", "", answer, ""]
    if error:
        lines += [f"> ⚠ {error}", ""]
    if status == "cancelled":
        lines += ["_Stopped before the answer was finished._"]
    elif status == "running":
        lines += ["_The tutor is answering… (open this notebook with a running kernel to see it)_"]
    return "\n".join(lines).rstrip() + "\n"
