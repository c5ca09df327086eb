"""Start a turn from the magic: ask the session, then show the turn in this cell.

The runtime (runtime/session.py) owns the turn; this module only builds the cell's view, displays
it with ``display_id=<turn id>`` and, when the turn ends, replaces the Markdown fallback with the
answer and the trace bundle the session recorded.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.kernel.display import (
    static_bundle,
    turn_markdown,
    view_bundle,
    widget_bundle,
)
from deeptutor_jupyter.kernel.i18n import t
from deeptutor_jupyter.providers.base import REQUEST_SENT

if TYPE_CHECKING:
    from deeptutor_jupyter.agent.events import Done, Event
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.kernel.widgets.turn_view import TurnView
    from deeptutor_jupyter.runtime.orchestrator import Turn
    from deeptutor_jupyter.store.db import PendingRow


def ask_in_cell(
    tutor: KernelTutor,
    resolved: ResolvedSettings,
    question: str,
    *,
    new: bool,
    kbs: list[str] | None = None,
    user_tools: tuple[str, ...] | None = None,
    no_tools: bool = False,
    attachments: list[Path] | None = None,
    capability: str = "chat",
    shown: str | None = None,
    instructions: bool = False,
) -> Turn | None:
    from IPython.display import display

    from deeptutor_jupyter.kernel.display import show_markdown
    from deeptutor_jupyter.kernel.notebook_context import hidden_tests, saved_cell
    from deeptutor_jupyter.runtime.plan import PlanError
    from deeptutor_jupyter.runtime.session import AskOptions

    if not resolved.ready:
        kwargs = dict(
            new=new,
            kbs=kbs,
            user_tools=user_tools,
            no_tools=no_tools,
            capability=capability,
            shown=shown,
            instructions=instructions,
        )

        def retry(now: ResolvedSettings) -> None:
            # The question that waited for a model goes, once the card's settings work.
            ask_in_cell(tutor, now, question, attachments=attachments, **kwargs)  # type: ignore[arg-type]

        show_setup(resolved, again=lambda: tutor.session.resolve(flags_of(resolved)), retry=retry)
        return None
    missing = [str(p) for p in attachments or [] if not p.is_file()]
    if missing:
        show_markdown(f"⚠ Attachment not found: {', '.join(missing)}")
        return None
    cell_id = tutor.last_cell_id
    cell = saved_cell(cell_id)
    tags = (cell.get("metadata") or {}).get("tags", [])
    tutor.cancel_cell(cell_id, t("superseded", resolved.settings.language))
    options = AskOptions(
        new=new,
        kbs=kbs or [],
        user_tools=user_tools,
        no_tools=no_tools,
        attachments=list(attachments or []),
        cell_id=cell_id,
        place=tutor.place(),
        # The instructor's policy may apply to tagged cells only, and checks an answer in an
        # exercise cell against its hidden tests.
        tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
        hidden_tests=hidden_tests(cell),
        capability=capability,
        shown=shown,
        instructions=instructions,
    )
    trace = resolved.settings.trace_in_outputs
    # Without ipywidgets imported yet (a kernel's first turn, sent by Run All before warming
    # got to it, or with warming off) the view waits until the request has left: importing
    # and building it first cost ~100 ms before the question reached the model (issue 28).
    later = ViewWhenSent(tutor, trace) if "ipywidgets" not in sys.modules else None
    token = REQUEST_SENT.set(later.sent) if later is not None else None
    try:
        turn = tutor.session.ask(question, resolved, options)  # its task copies REQUEST_SENT
    except PlanError as exc:
        show_markdown(str(exc))
        return None
    finally:
        if token is not None:
            REQUEST_SENT.reset(token)
    label = turn.ctx.profile.label
    words = shown if instructions and shown else question
    running_md = turn_markdown(words, "", model=label, status="running", tools=[])
    if later is not None:
        display(view_bundle(running_md, turn.turn_id), raw=True, display_id=turn.turn_id)  # type: ignore[no-untyped-call]
        later.follow(turn, running_md)
    else:
        view = attach_view(tutor, turn, trace=trace)
        display(widget_bundle(view, running_md, turn.turn_id), raw=True, display_id=turn.turn_id)  # type: ignore[no-untyped-call]
    if cell_id:
        tutor.cell_turns[cell_id] = turn
    return turn


class ViewWhenSent:
    """A turn's cell view built once its request is on the wire, while the model thinks.

    The cell shows the turn's running Markdown (``view_bundle``) under the turn's display id
    from the start; the widget then replaces it there (``update_display``) and replays the
    events so far. It is built when the HTTP layer says the request's body is written
    (``REQUEST_SENT``, called inside the turn's task: it only schedules), or at the turn's
    first event that shows something (an error before anything was sent, the answer from a
    transport that does not trace), whichever comes first; once.
    """

    # What a turn emits before its request; any other event is for the learner to see now.
    BEFORE_REQUEST = ("turn_started", "round_started")

    def __init__(self, tutor: KernelTutor, trace: bool) -> None:
        self._tutor, self._trace = tutor, trace
        self._loop = asyncio.get_running_loop()
        self._turn: Turn | None = None
        self._markdown = ""

    def sent(self) -> None:
        from deeptutor_jupyter.kernel import warm

        warm.request_sent()  # the garbage collector may run again (kernel/warm.py)
        self._loop.call_soon(self.show)

    def follow(self, turn: Turn, markdown: str) -> None:
        self._turn, self._markdown = turn, markdown
        turn.log.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        if event.body.type not in self.BEFORE_REQUEST:
            self.show()

    def show(self) -> None:
        from IPython.display import update_display

        turn, self._turn = self._turn, None  # a later request of the task finds it done
        if turn is None:
            return
        turn.log.unsubscribe(self._on_event)

        def replace(view: TurnView) -> None:  # before any final bundle the replay may send
            bundle = widget_bundle(view, self._markdown, turn.turn_id)
            update_display(bundle, raw=True, display_id=turn.turn_id)  # type: ignore[no-untyped-call]

        try:
            attach_view(self._tutor, turn, trace=self._trace, on_view=replace)
        except Exception as exc:
            # Called back from the loop, where nothing above would say it; the turn goes on in
            # the store, and without this the cell would say "running" for good.
            error = f"{type(exc).__name__}: {exc}"
            words = t("view_failed", turn.ctx.language).format(error=error)
            update_display(
                view_bundle(f"{self._markdown}\n\n{words}", turn.turn_id),
                raw=True,
                display_id=turn.turn_id,
            )  # type: ignore[no-untyped-call]


def show_resumed(tutor: KernelTutor, turn: Turn, row: PendingRow) -> None:
    """A turn this kernel resumed for an answer given here shows under that card."""
    from deeptutor_jupyter.kernel.interactions import pending_display_id

    box = tutor.pending_boxes.get(row.request_id)
    also = {pending_display_id(row.request_id): box} if box is not None else {}
    view = attach_view(tutor, turn, also=also)
    slot = tutor.slots.get(row.request_id)
    if slot is not None:
        slot.children = (view,)


def attach_view(
    tutor: KernelTutor,
    turn: Turn,
    trace: bool = True,
    also: dict[str, Any] | None = None,
    on_view: Callable[[TurnView], None] | None = None,
) -> TurnView:
    """A TurnView subscribed to the turn, which keeps the saved notebook true as it goes.

    The view shows under ``display_id=<turn id>`` (the cell that asked). While a question waits,
    that display's Markdown says so and how to answer it after a kernel restart; at the end it
    becomes the question, the answer and the trace. ``also`` maps more display ids to the widget
    each shows (the ``%tutor pending`` cell where a resumed turn goes on): they get the final
    bundle too, so the answer is in the saved file wherever the learner answered. ``on_view``
    is called with the new view before it hears the turn's events (``ViewWhenSent``).
    """
    from IPython.display import update_display

    from deeptutor_jupyter.agent.events import (
        Done,
        Sources,
        ToolCallStarted,
        UserInputRequired,
    )
    from deeptutor_jupyter.kernel import interactions, quiz_cards
    from deeptutor_jupyter.kernel.release import release_finished_view
    from deeptutor_jupyter.kernel.turn_plan import source_links, sources_markdown
    from deeptutor_jupyter.kernel.widgets.turn_view import TurnView, unparented

    session, log = tutor.session, turn.log
    language = session.language
    label = turn.ctx.profile.label
    # The learner's words where the question sent is instructions (`%tutor learn`; the trace
    # keeps them); a `why` or `--cell` question shows whole, with the error or code it quotes.
    shown = turn.ctx.metadata.get("shown")
    question = shown if shown and turn.ctx.metadata.get("instructions") else turn.ctx.question

    def stop() -> None:
        session.stop(turn.turn_id, t("stopped_by_learner", language))

    # Its opens are widget traffic too: no parent request (~220 bytes each; the display that
    # shows the view in its cell keeps its parent).
    view = unparented().run(
        TurnView,
        model_label=label,
        language=language,
        on_stop=stop,
        make_card=lambda body: interactions.make_card(tutor, body),
    )
    view.make_quiz_card = lambda body: quiz_cards.quiz_card_for(tutor, body)
    if on_view is not None:
        on_view(view)
    log.subscribe(view.handle)
    view.start_ticker()
    tools_used: list[str] = []
    sources: list[tuple[str, str]] = []

    def on_event(event: Event) -> None:
        match event.body:
            case ToolCallStarted(name=name):
                tools_used.append(name)
            case Sources(hits=hits):
                sources[:] = source_links(hits, tutor.workspace)
                view.show_sources(sources_markdown(sources, answer=view.answer_text))
            case UserInputRequired(title=title):
                waiting = turn_markdown(
                    question, "", model=label, status="waiting", tools=tools_used
                )
                waiting += "\n" + t("waiting_saved", language).format(title=title)
                bundle = widget_bundle(view, waiting, turn.turn_id)
                update_display(bundle, raw=True, display_id=turn.turn_id)  # type: ignore[no-untyped-call]
            case Done():
                finished(event.body)

    def finished(done: Done) -> None:
        md = final_markdown(session.events_of(turn), done, question, label, sources)
        policy = turn.ctx.metadata.get("policy") or {}
        if policy.get("source"):  # the badge, readable without widgets
            md = f"_{policy['badge']}_\n\n" + md
        bundles = []
        for display_id in (turn.turn_id, *(also or {})):
            bundle = final_bundle(md, display_id, turn, trace)
            update_display(bundle, raw=True, display_id=display_id)  # type: ignore[no-untyped-call]
            bundles.append(bundle)
        # The closes are widget traffic: no parent request (turn_view.unparented).
        if unparented().run(release_finished_view, view, bundles):
            log.unsubscribe(view.handle)  # the session keeps the turn, not its view
            log.unsubscribe(on_event)

    log.subscribe(on_event)
    return view


def final_markdown(
    events: list[Event],
    done: Done,
    question: str,
    label: str,
    sources: list[tuple[str, str]],
) -> str:
    """The finished turn as Markdown, in the order it happened: the question, then the text the
    tutor wrote, its tool cards, each question with the learner's answer (labels and typed
    text) and each quiz's receipt; then errors and sources."""
    from deeptutor_jupyter.agent.events import ErrorEvent
    from deeptutor_jupyter.kernel.display import streamed_answer, transcript_markdown
    from deeptutor_jupyter.kernel.turn_plan import sources_markdown

    streamed = streamed_answer(events)
    answer = streamed or done.answer
    blocks = transcript_markdown(events)
    if not streamed and done.answer.strip():
        blocks.append(done.answer.strip())  # an answer that came in one piece, not streamed
    lines = [f"**You:** {question}", ""]
    if blocks:
        lines += [f"**Tutor** ({label}):", ""]
        for block in blocks:
            lines += [block, ""]
    error = "; ".join(e.body.message for e in events if isinstance(e.body, ErrorEvent))
    if error:
        lines += [f"> ⚠ {error}", ""]
    if done.status == "cancelled":
        lines += ["_Stopped before the answer was finished._"]
    md = "\n".join(lines).rstrip() + "\n"
    if sources:
        md += "\n" + sources_markdown(sources, answer=answer) + "\n"
    return md


def final_bundle(md: str, display_id: str, turn: Turn, trace: bool) -> dict[str, Any]:
    """The cell's second life: a static rendering that needs no widget model, and the trace."""
    if trace and turn.trace is not None:
        from deeptutor_jupyter.memory import TRACE_MIME

        return static_bundle(md, display_id, {TRACE_MIME: turn.trace.model_dump(mode="json")})
    return static_bundle(md, display_id)


def show_setup(
    resolved: ResolvedSettings,
    *,
    again: Callable[[], ResolvedSettings] | None = None,
    retry: Callable[[ResolvedSettings], None] | None = None,
) -> None:
    """The setup card; with ``retry``, the question that was waiting runs as soon as a Save
    leaves nothing missing (under the card, so the learner need not run the cell again)."""
    import ipywidgets as widgets
    from IPython.display import display

    from deeptutor_jupyter.kernel.widgets.setup_card import SetupCard

    below = widgets.Output()

    def saved(_path: Path) -> None:
        if retry is None or again is None or card.missing:
            return
        now = again()
        if now.ready:
            with below:  # the turn's view shows under the card, in this cell
                retry(now)

    card = SetupCard(resolved, on_saved=saved, reruns=retry is not None)
    box = widgets.VBox([card, below]) if retry is not None else card
    if retry is not None:
        display(widget_bundle(box, card.fallback_markdown()), raw=True)  # type: ignore[no-untyped-call]
    else:
        display(card)  # type: ignore[no-untyped-call]


def flags_of(resolved: ResolvedSettings) -> dict[str, Any]:
    """The flags the learner gave (``--model``...), to resolve the settings again with them."""
    return {
        name: getattr(resolved.settings, name)
        for name, source in resolved.sources.items()
        if source.startswith("--") and hasattr(resolved.settings, name)
    }
