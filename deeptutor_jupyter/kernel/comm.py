"""The kernel end of the sidebar's comm (target ``deeptutor``; the panel end is
labextension/src/chat.ts, the protocol is in docs/sidebar.md).

The panel gets no loop of its own: ``ask`` starts a turn on the same path as ``%tutor``, and
the panel renders that turn's events. Each call into the runtime is one small adapter function
(``_start``, ``_stop``, ``_answer``, ``_live_log``, ``_saved_events``, ``_turn_summaries``) so
that moving to the runtime's ``TutorSession`` touches only those.

Content deltas are coalesced: a long answer reaches the panel as a few messages per second,
never one per token. ``%load_ext`` imports this module to register the comm target, so what a
turn's forwarding needs (the event models, pydantic) is imported on first use, never at load.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.agent.events import Event
    from deeptutor_jupyter.interaction.schema import AskUserResult
    from deeptutor_jupyter.kernel.comm_messages import (
        AnswerAction,
        AskAction,
        ChooseAction,
        DeleteAction,
        NewAction,
        QuizAnswerAction,
        RegenerateAction,
        RenameAction,
        StopAction,
        SubscribeAction,
        SwitchAction,
    )
    from deeptutor_jupyter.kernel.tutor import KernelTutor
    from deeptutor_jupyter.runtime.context import AttachedContext
    from deeptutor_jupyter.runtime.events import EventLog

log = logging.getLogger(__name__)

TARGET = "deeptutor"
FLUSH_SECONDS = 0.25  # at most ~4 content messages a second per turn

Send = Callable[[dict[str, Any]], None]
Wire = dict[str, Any]


def register(ipython: Any, tutor_of: Callable[[], KernelTutor | None]) -> bool:
    """Register the comm target on the kernel; False in a terminal IPython (no kernel).

    Called from ``%load_ext`` on the kernel's main loop, which every comm handler then runs on:
    comm messages may arrive on another thread (a subshell), and the tutor's state (opening the
    store, starting turns, timers) belongs to the loop, like the magic's.
    """
    manager = getattr(getattr(ipython, "kernel", None), "comm_manager", None)
    if manager is None:
        return False
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None

    def on_open(comm: Any, msg: dict[str, Any]) -> None:
        channel = Channel(comm, tutor_of, on_loop(loop))
        # Listen at once: the panel's first action may arrive (on a subshell) while ``start``
        # still waits for the loop or for the warming imports; a comm without a handler yet
        # drops it silently. Each message is posted to the loop after ``start``.
        channel.listen()
        channel.run(channel.start)

    manager.register_target(TARGET, on_open)
    return True


def on_loop(loop: asyncio.AbstractEventLoop | None) -> Callable[[Callable[[], None]], None]:
    """Run a callable on ``loop``: at once when already there, else posted thread-safely."""

    def run(fn: Callable[[], None]) -> None:
        from deeptutor_jupyter.kernel import warm

        warm.wait()  # a panel opened while the first-turn imports warm up waits for them
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop is None or here is loop:
            fn()
        else:
            loop.call_soon_threadsafe(fn)

    return run


def unregister(ipython: Any) -> None:
    manager = getattr(getattr(ipython, "kernel", None), "comm_manager", None)
    if manager is not None:
        manager.unregister_target(TARGET, manager.targets.get(TARGET))


def wire_event(event: Event) -> Wire:
    """``{"type": "event", "event": {type, seq, turn_id, ts, **data}}``: a ``TurnEvent``."""
    return {"type": "event", "event": event.envelope()}


def coalesce(events: Iterable[Event]) -> list[Wire]:
    """Merge runs of content (or thinking) events of one turn into one event with the last seq.

    Used for replays; live events go through ``Coalescer``, which does the same over time.
    """
    out: list[Event] = []
    for event in events:
        joined = _joined(out[-1], event) if out else None
        if joined is not None:
            out[-1] = joined
        else:
            out.append(event)
    return [wire_event(e) for e in out]


def _joined(last: Event, event: Event) -> Event | None:
    """``last`` with the text of ``event`` added, when both are deltas of one stream."""
    from deeptutor_jupyter.agent.events import Content, Thinking

    if last.turn_id != event.turn_id or last.body.explore != event.body.explore:
        return None
    match last.body, event.body:
        case (Content() as held, Content() as delta) | (Thinking() as held, Thinking() as delta):
            body = held.model_copy(update={"text": held.text + delta.text})
            return replace(last, body=body, seq=event.seq)
    return None


class Coalescer:
    """Forwards one turn's events; holds content deltas back for ``FLUSH_SECONDS``."""

    def __init__(self, send: Send, loop: asyncio.AbstractEventLoop) -> None:
        self.send = send
        self.loop = loop
        self.held: list[Event] = []
        self.timer: asyncio.TimerHandle | None = None

    def __call__(self, event: Event) -> None:
        from deeptutor_jupyter.agent.events import Content, Thinking

        if isinstance(event.body, Content | Thinking):
            self.held.append(event)
            if self.timer is None:
                self.timer = self.loop.call_later(FLUSH_SECONDS, self.flush)
            return
        self.flush()  # everything before this event first, in order
        self.send(wire_event(event))

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        held, self.held = self.held, []
        for message in coalesce(held):
            self.send(message)


class Channel:
    """One open comm: the panel of one notebook in one browser tab."""

    def __init__(
        self,
        comm: Any,
        tutor_of: Callable[[], KernelTutor | None],
        run: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.comm = comm
        self.tutor_of = tutor_of
        self.run = run or (lambda fn: fn())
        self.subscriptions: dict[str, tuple[EventLog, Callable[[Event], None]]] = {}
        self.closed = False

    def listen(self) -> None:
        self.comm.on_msg(lambda msg: self.run(lambda: self.on_msg(msg)))
        self.comm.on_close(lambda msg: self.run(lambda: self.on_close(msg)))

    def start(self) -> None:
        tutor = self.tutor_of()
        if tutor is not None:
            open_store(tutor)
            self.send(_turn_summaries(tutor))
            self.send_choices(tutor)

    def send_choices(self, tutor: KernelTutor) -> None:
        """The chooser's model and knowledge bases (kernel/choose.py); none before a model is
        configured: the setup card comes first."""
        from deeptutor_jupyter.kernel.choose import choices

        found = choices(tutor)
        if found is not None:
            self.send(found)

    def send(self, message: Wire) -> None:
        if not self.closed:
            self.comm.send(message)

    def refuse(self, action: str, message: str, code: str = "error", **about: Any) -> None:
        self.send({"type": "error", "action": action, "message": message, "code": code, **about})

    def on_close(self, msg: Any = None) -> None:
        self.closed = True
        for turn_log, forward in self.subscriptions.values():
            turn_log.unsubscribe(forward)
        self.subscriptions.clear()

    def on_msg(self, msg: dict[str, Any]) -> None:
        from deeptutor_jupyter.kernel.comm_messages import BadAction, parse_action

        try:
            data = parse_action(msg.get("content", {}).get("data"))
        except BadAction as exc:
            self.refuse(exc.action, str(exc), "invalid")
            return
        handler: Callable[[KernelTutor, Any], None] = getattr(self, data.action)
        tutor = self.tutor_of()
        if tutor is None:
            self.refuse(data.action, "The tutor extension was unloaded from this kernel.")
            return
        try:
            handler(tutor, data)
        except Exception as exc:  # the panel must hear about it; the kernel must not die of it
            log.exception("sidebar action %s failed", data.action)
            self.refuse(data.action, f"{type(exc).__name__}: {exc}")

    # actions (each gets its validated model from kernel/comm_messages.py) ---------------------
    def ask(self, tutor: KernelTutor, data: AskAction) -> None:
        question = data.question
        if not question.strip():
            self.refuse("ask", "Type a question first.")
            return
        if data.conversation not in (None, "", tutor.session.session_id):
            self.refuse("ask", "Only this notebook's current conversation can be continued here.")
            return
        from deeptutor_jupyter.kernel.attachments import AttachmentError

        try:
            context = _context(tutor, data)
        except AttachmentError as exc:
            self.refuse("ask", str(exc), "attachment", attachment=exc.index)
            return
        started = _start(tutor, question.strip(), context)
        if isinstance(started, str):
            self.refuse("ask", started, "not_started")
            return
        self.send({"type": "asked", "turn_id": started.turn_id})
        self.send(_turn_summaries(tutor))
        self.follow(tutor, started, 0)

    def quiz_answer(self, tutor: KernelTutor, data: QuizAnswerAction) -> None:
        """Grade a quiz through the same door as the cell's form (``TutorSession.submit_quiz``):
        consumed once, the graded result becomes the tool result of the make_quiz call, whose
        turn goes on in its owner's cell."""
        open_store(tutor)
        tutor.background(self._grade(tutor, data))

    async def _grade(self, tutor: KernelTutor, data: QuizAnswerAction) -> None:
        from deeptutor_jupyter.interaction.quiz import QuizError

        try:
            result = await tutor.session.submit_quiz(
                data.session_id, data.quiz_id, data.answers, data.seconds
            )
        except QuizError as exc:
            self.refuse("quiz_answer", str(exc), exc.code, quiz_id=data.quiz_id)
            return
        except Exception as exc:  # grading failed: the quiz stays open, nothing is lost
            log.exception("grading a quiz from the panel failed")
            self.refuse("quiz_answer", f"Grading failed ({type(exc).__name__}: {exc}). Submit "
                        "again.", quiz_id=data.quiz_id)  # fmt: skip
            return
        self.send(
            {"type": "quiz_graded", "quiz_id": data.quiz_id, "score": result.score,
             "results": [r.wire() for r in result.results]}
        )  # fmt: skip

    def stop(self, tutor: KernelTutor, data: StopAction) -> None:
        if not _stop(tutor, data.turn_id):
            self.refuse("stop", "That turn is not running in this kernel.", "unknown")

    def answer(self, tutor: KernelTutor, data: AnswerAction) -> None:
        from deeptutor_jupyter.interaction.coordinator import InteractionError, resolved_fields
        from deeptutor_jupyter.kernel.comm_messages import AnsweredMessage

        try:
            result = _answer(
                tutor,
                data.session_id,
                data.request_id,
                list(data.selections),
                data.custom_input,
                data.cancelled,
            )
        except InteractionError as exc:
            self.refuse("answer", str(exc), exc.code)
            return
        answered = AnsweredMessage.model_validate(
            {"request_id": data.request_id, "result": resolved_fields(result)}
        )
        self.send(answered.model_dump(mode="json"))

    def subscribe(self, tutor: KernelTutor, data: SubscribeAction) -> None:
        turn_id, after_seq = data.turn_id, data.after_seq
        if turn_id in self.subscriptions:
            return  # already streaming to this panel; a second stream would repeat coalesced text
        live = _live_log(tutor, turn_id)
        if live is not None:
            self.follow(tutor, live, after_seq)
            return
        events = _saved_events(tutor, turn_id, after_seq)
        if events is None:
            self.refuse("subscribe", f"No turn {turn_id!r} in this notebook.", "unknown")
            return
        for message in coalesce(events):
            self.send(message)

    def new(self, tutor: KernelTutor, data: NewAction) -> None:
        _new_conversation(tutor)
        self.send(_turn_summaries(tutor))
        self.send_choices(tutor)

    def switch(self, tutor: KernelTutor, data: SwitchAction) -> None:
        if not _switch_conversation(tutor, data.conversation):
            self.refuse("switch", "No such conversation in this notebook.", "unknown")
            return
        self.send(_turn_summaries(tutor))
        self.send_choices(tutor)

    def choose(self, tutor: KernelTutor, data: ChooseAction) -> None:
        from deeptutor_jupyter.kernel.choose import choose

        refused = choose(tutor, data)
        if refused:
            self.refuse("choose", refused, "choice")
            return
        self.send_choices(tutor)

    def rename(self, tutor: KernelTutor, data: RenameAction) -> None:
        if not _rename_conversation(tutor, data.conversation, data.title):
            self.refuse("rename", "No such conversation in this notebook.", "unknown")
            return
        self.send(_turn_summaries(tutor))

    def regenerate(self, tutor: KernelTutor, data: RegenerateAction) -> None:
        """A new turn in place of the last answer (runtime/session_edits.py), followed live."""
        from deeptutor_jupyter.kernel.panel_edits import regenerate

        started = regenerate(tutor, data.turn_id, PANEL, NO_MODEL)
        if isinstance(started, tuple):
            self.refuse("regenerate", started[1], started[0])
            return
        self.send({"type": "asked", "turn_id": started.turn_id})
        self.send(_turn_summaries(tutor))
        self.follow(tutor, started, 0)

    def delete(self, tutor: KernelTutor, data: DeleteAction) -> None:
        from deeptutor_jupyter.kernel.panel_edits import delete

        open_store(tutor)
        refused = delete(tutor, data.conversation)
        if refused is not None:
            self.refuse("delete", refused[1], refused[0])
            return
        self.send(_turn_summaries(tutor))

    def follow(self, tutor: KernelTutor, turn_log: EventLog, after_seq: int) -> None:
        """Forward a live turn's events after ``after_seq``, then follow it until it is done;
        then the turn list again (the finished turn now counts in its conversation)."""
        old = self.subscriptions.pop(turn_log.turn_id, None)
        if old is not None:
            old[0].unsubscribe(old[1])
        from deeptutor_jupyter.agent.events import Done

        coalescer = Coalescer(self.send, asyncio.get_running_loop())

        def forward(event: Event) -> None:
            coalescer(event)
            if isinstance(event.body, Done):
                turn_log.unsubscribe(forward)
                self.subscriptions.pop(turn_log.turn_id, None)
                self.send(_turn_summaries(tutor))
                self.send_choices(tutor)  # a knowledge base made meanwhile can be chosen now

        self.subscriptions[turn_log.turn_id] = (turn_log, forward)
        turn_log.subscribe(forward, after_seq)


# adapters: the only calls into the runtime (runtime/session.py; kernel/panel_edits.py) ----------
PANEL = "the Tutor panel"
NO_MODEL = (
    "The tutor has no model configured yet. Run %tutor config in a cell, or set "
    "DEEPTUTOR_PROVIDER, DEEPTUTOR_MODEL and the provider's API key."
)


def _context(tutor: KernelTutor, data: AskAction) -> list[AttachedContext]:
    """The attachments of an ask, read by the notebook-context tools (kernel/attachments.py)."""
    if not data.attachments:
        return []
    from deeptutor_jupyter.kernel.attachments import resolve

    return resolve(
        data.attachments,
        shell=tutor.shell,
        cell_errors=tutor.cell_errors,
        notebook_path=data.notebook_path,
        language=tutor.session.language,
    )


def _start(
    tutor: KernelTutor, question: str, context: list[AttachedContext] | None = None
) -> EventLog | str:
    """Ask the notebook's session, as a cell would; the log to follow, or why it did not start.

    The turn belongs to no cell: it neither replaces a cell's running turn nor shows a widget.
    """
    from deeptutor_jupyter.runtime.plan import PlanError
    from deeptutor_jupyter.runtime.session import AskOptions

    session = tutor.session
    resolved = session.resolve({})
    if not resolved.ready:
        return NO_MODEL
    place = {"notebook": Path(session.notebook).name, "cell": PANEL}
    capability, question = panel_capability(question)
    options = AskOptions(place=place, context=context or [], capability=capability)
    try:
        turn = session.ask(question, resolved, options)
    except PlanError as exc:
        return str(exc)
    return turn.log


SOLVE_PREFIX = "/solve "


def panel_capability(question: str) -> tuple[str, str]:
    """``/solve <problem>`` typed in the panel is ``%tutor solve <problem>``."""
    if question.startswith(SOLVE_PREFIX) and question[len(SOLVE_PREFIX) :].strip():
        return "solve", question[len(SOLVE_PREFIX) :].strip()
    return "chat", question


def open_store(tutor: KernelTutor) -> None:
    """Open the notebook's store on connect, so the panel shows the conversation so far."""
    session = tutor.session
    if not session.is_open:
        try:
            session.open(session.resolve({}))
        except Exception:  # an unreadable store is reported by the first turn, in words
            log.warning("the sidebar could not open the tutor's store", exc_info=True)


def _stop(tutor: KernelTutor, turn_id: str) -> bool:
    return tutor.session.stop(turn_id, "Stopped from the Tutor panel.")


def _answer(
    tutor: KernelTutor,
    session_id: str,
    request_id: str,
    selections: list[str],
    custom_input: str,
    cancelled: bool,
) -> AskUserResult:
    return tutor.session.submit(session_id, request_id, selections, custom_input, cancelled)


def _live_log(tutor: KernelTutor, turn_id: str) -> EventLog | None:
    return tutor.session.live_log(turn_id)


def _saved_events(tutor: KernelTutor, turn_id: str, after_seq: int) -> list[Event] | None:
    """A finished turn of this notebook, from the store; None if it is not this notebook's."""
    return tutor.session.replay(turn_id, after_seq)


def _new_conversation(tutor: KernelTutor) -> None:
    """A fresh conversation for the notebook; its next ``%tutor`` cell continues it too."""
    open_store(tutor)
    tutor.session.new_conversation()


def _switch_conversation(tutor: KernelTutor, session_id: str) -> bool:
    open_store(tutor)
    return tutor.session.switch(session_id)


def _rename_conversation(tutor: KernelTutor, session_id: str, title: str) -> bool:
    open_store(tutor)
    return tutor.session.rename(session_id, title)


def _turn_summaries(tutor: KernelTutor) -> Wire:
    """The turns of the notebook's current conversation, oldest first, with their last seq;
    the notebook's conversations that have turns, oldest first, named by the learner or by
    their first question."""
    session = tutor.session
    return {
        "type": "turns",
        "session_id": session.session_id,
        "notebook": session.notebook,
        "turns": [asdict(t) for t in session.turn_summaries()],
        "conversations": [asdict(c) for c in session.conversations()],
    }
