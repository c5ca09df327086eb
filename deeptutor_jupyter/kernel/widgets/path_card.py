"""The form where the learner confirms or edits a proposed learning path (``%tutor learn``).

The proposal comes from the course's ``TUTOR.md`` (an ``## Objectives`` list), else from the
model (with a knowledge base's passages as context when ``--kb`` is given), else the learner
writes it. Whatever the source, the learner sees one objective per line and can change it; only
the confirmed text is validated (learning/path.py) and saved.
"""

from __future__ import annotations

import html
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import ipywidgets as widgets

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.learning.path import LearningPath
    from deeptutor_jupyter.runtime.learning import Learning


SHOWN: list[PathCard] = []  # the path forms of this kernel, latest last (kernel/learn_api.py)


class PathCard(widgets.VBox):  # type: ignore[misc]
    def __init__(self, topic: str, learning: Learning, kb: str | None = None) -> None:
        self.topic = topic
        self.learning = learning
        self.kb = kb
        self.source = "learner"
        self.state = "planning"
        self.display_id: str | None = None  # saved, that output becomes the static path
        self.title = widgets.HTML(f"<b>Learning path: {html.escape(topic)}</b>")
        self.note = widgets.HTML("<i>Planning a path…</i>")
        self.lines = widgets.Textarea(
            placeholder="One objective per line, e.g.  Vectors: adding and scaling",
            layout=widgets.Layout(width="100%", height="160px"),
        )
        self.lines.add_class("dt-path-lines")
        self.error = widgets.HTML()
        self.confirm = widgets.Button(description="Start this path", button_style="primary")
        self.confirm.add_class("dt-path-confirm")
        self.confirm.disabled = True
        self.confirm.on_click(lambda _b: self.save())
        super().__init__(children=[self.title, self.note, self.lines, self.error, self.confirm])
        self.add_class("dt-path")
        SHOWN.append(self)

    def propose(self, path: LearningPath | None, note: str) -> None:
        if path is not None:
            self.source = path.source
            self.lines.value = "\n".join(
                f"{o.title}: {o.description}" if o.description else o.title for o in path.objectives
            )
        self.note.value = f'<div style="opacity:0.75">{html.escape(note)}</div>'
        self.state = "open"
        self.confirm.disabled = False

    def save(self) -> None:
        """The Start button: validate the edited lines, save the path, show the receipt."""
        from deeptutor_jupyter.learning.path import PathError, path_from_lines

        if self.state != "open":
            return
        try:
            path = path_from_lines(self.topic, self.lines.value, self.source)
        except PathError as exc:
            self.error.value = f'<div style="color:#c62828">⚠ {html.escape(str(exc))}</div>'
            return
        path.kb = self.kb
        path_id = f"path-{uuid.uuid4().hex[:10]}"
        self.learning.store.save_path(path_id, self.topic, path.model_dump(mode="json"))
        self.state = "saved"
        items = "".join(f"<li>{html.escape(o.title)}</li>" for o in path.objectives)
        receipt = widgets.HTML(
            f"<b>Learning path saved: {html.escape(self.topic)}</b><ol>{items}</ol>"
            "Run <code>%tutor learn</code> to begin with "
            f"<b>{html.escape(path.objectives[0].title)}</b>. "
            "Each objective opens once quizzes show you master the one before."
        )
        receipt.add_class("dt-path-saved")
        self.children = (receipt,)
        self._settle(path)

    def _settle(self, path: LearningPath) -> None:
        """The saved path as a static output: its objectives in the file, no widget model
        needed to read them the next day (issue 20)."""
        if self.display_id is None:
            return
        from IPython.display import update_display

        from deeptutor_jupyter.kernel.display import static_bundle

        lines = [f"**Learning path saved: {self.topic}**", ""]
        for n, o in enumerate(path.objectives, 1):
            lines.append(f"{n}. {o.title}" + (f": {o.description}" if o.description else ""))
        lines += [
            "",
            f"Run `%tutor learn` to begin with **{path.objectives[0].title}**. Each objective "
            "opens once quizzes show you master the one before.",
        ]
        bundle = static_bundle("\n".join(lines) + "\n", self.display_id)
        update_display(bundle, raw=True, display_id=self.display_id)  # type: ignore[no-untyped-call]


def _tutor_md_path(topic: str, start: Path, home: Path | None = None) -> LearningPath | None:
    """The objectives of the nearest TUTOR.md that lists some, else of the course's packs."""
    from deeptutor_jupyter.learning.path import LearningPath, objectives_from_titles
    from deeptutor_jupyter.learning.path import objectives_in_tutor_md as listed
    from deeptutor_jupyter.runtime.course import course_packs

    packs = course_packs(home) if home is not None else []
    course = [p.tutor_md for p in packs if p.tutor_md is not None]
    for md in [folder / "TUTOR.md" for folder in (start, *start.parents)] + course:
        if md.is_file():
            titles = listed(md.read_text(encoding="utf-8", errors="replace"))
            if titles:
                objectives = objectives_from_titles(titles)
                return LearningPath(topic=topic, objectives=objectives, source="TUTOR.md")
    return None


def propose_path(
    tutor: KernelTutor, resolved: ResolvedSettings, learning: Learning, topic: str, kb: str | None
) -> PathCard:
    from IPython.display import display

    from deeptutor_jupyter.kernel.display import widget_bundle

    card = PathCard(topic, learning, kb)
    card.display_id = f"path-{uuid.uuid4().hex[:10]}"
    text = f"**Learning path:** {topic} (not started: open the notebook with its kernel to edit it)"
    bundle = widget_bundle(card, text, card.display_id)
    display(bundle, raw=True, display_id=card.display_id)  # type: ignore[no-untyped-call]
    from_md = _tutor_md_path(topic, tutor.workspace.resolve(), resolved.settings.home)
    if from_md is not None:
        card.propose(from_md, "From the course's TUTOR.md. Edit it if you like, then start.")
    elif resolved.ready:
        tutor.background(_from_model(tutor, resolved, card, topic, kb))
    else:
        card.propose(None, "No model is configured: write the objectives, one per line.")
    return card


async def _from_model(
    tutor: KernelTutor, resolved: ResolvedSettings, card: PathCard, topic: str, kb: str | None
) -> None:
    from deeptutor_jupyter.interaction.quiz import model_completer
    from deeptutor_jupyter.learning.path import parse_path_reply, path_request

    context = _kb_context(resolved.settings.home, kb, topic) if kb else ""
    try:
        reply = await model_completer(tutor.session.model_for(resolved))(
            path_request(topic, context)
        )
        path = parse_path_reply(topic, reply, "kb" if context else "model")
    except Exception as exc:  # PathError, or the model could not be reached
        card.propose(None, f"No path could be proposed ({exc}). Write the objectives yourself.")
        return
    card.propose(path, "Proposed by the tutor. Edit it if you like, then start.")


def _kb_context(home: Path, kb: str, topic: str) -> str:
    from deeptutor_jupyter.knowledge import KnowledgeBase

    try:
        hits = KnowledgeBase(home, kb).search(topic, k=5)
    except Exception:
        return ""
    return "\n\n".join(f"[{h.chunk.path}] {h.chunk.text[:600]}" for h in hits)
