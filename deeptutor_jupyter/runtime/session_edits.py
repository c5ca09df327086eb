"""What a learner changes in a conversation, through the one ``TutorSession`` every surface drives
(the panel's Regenerate and Delete; docs/sidebar.md):

- **Regenerate** the last answer: a new turn asks the last question again and takes the old
  turn's place. The old turn and its messages stay in the store marked ``replaced_by`` the new
  one (its events replay, its trace stays in L1), but they leave the conversation's history and
  turn list; the new turn's ``turn_started`` and trace name the turn they replace (and memory
  consolidation skips the replaced trace, memory/trace.py ``not_replaced``). Refused while
  a turn of the conversation runs or one of its questions waits: the tail is not settled.
- **Delete** a conversation: its waiting questions and quizzes are cancelled (a turn waiting on
  one ends, here or in another kernel), its turns running here are stopped, and the conversation
  is tombstoned (``sessions.deleted_at``), so no read lists it, its turns or its history again.
  A tombstone rather than deleted rows: a turn of it in another kernel may still write its end
  after the cancel, and it lands on a hidden conversation instead of rows without one. Its L1
  traces stay: the learner's memory cites them as footnotes, and what the tutor learnt from the
  conversation is removed in the Memory tab, where the learner sees it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Protocol, cast

from deeptutor_jupyter.errors import DeepTutorError

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator
    from deeptutor_jupyter.messages import Message
    from deeptutor_jupyter.runtime.ask import AskOptions
    from deeptutor_jupyter.runtime.orchestrator import Turn
    from deeptutor_jupyter.runtime.session_reads import Conversation
    from deeptutor_jupyter.store.db import PendingRow, Store, TurnRow


class _Session(Protocol):
    """What of ``TutorSession`` the edits use (named here, not imported: it imports this)."""

    notebook: str
    session_id: str
    history: list[Message]
    _store: Store | None
    _coordinator: InteractionCoordinator | None

    def open(self, resolved: ResolvedSettings) -> None: ...
    def ask(self, question: str, resolved: ResolvedSettings, options: AskOptions) -> Turn: ...
    def running_turns(self) -> list[Turn]: ...
    def pending(self, *, session_id: str) -> list[PendingRow]: ...
    def replay(self, turn_id: str) -> list[Any] | None: ...
    def stop(self, turn_id: str, reason: str) -> bool: ...
    def conversations(self) -> list[Conversation]: ...
    def switch(self, session_id: str) -> bool: ...
    def new_conversation(self) -> str: ...
    def learning(self) -> Any: ...  # runtime/learning.py's Learning, which imports the session


DELETED = "conversation_deleted"  # the reason a deleted conversation's questions were closed


class EditRefused(DeepTutorError):
    """A regenerate or delete that cannot be done now; ``code`` says which case, the message
    what to do (the panel shows it as it is)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class SessionEdits:
    """Regenerate and delete, offered by ``TutorSession`` (``self`` is one)."""

    def regenerate(
        self, turn_id: str, resolved: ResolvedSettings, place: dict[str, Any] | None = None
    ) -> Turn:
        """Ask the last question of the current conversation again, in place of ``turn_id``
        (the answer the learner asked to regenerate: refused unless it is still the last)."""
        from deeptutor_jupyter.runtime.ask import AskOptions, new_turn_id

        session = cast("_Session", self)
        session.open(resolved)
        store = _store(session)
        if session.session_id not in store.sessions_of(session.notebook):
            # Deleted in another kernel of the notebook: its turn is not the learner's to redo,
            # and a new turn would land in a fresh conversation without what it continued.
            raise EditRefused("unknown", "This conversation was deleted; ask again instead.")
        last = _last_turn(store, session.session_id, turn_id)
        _refuse_if_busy(session, store)
        question, capability = _asked(session, store, last)
        new_id = new_turn_id()
        store.replace_turn(last.id, new_id)
        session.history = store.history(session.session_id)
        options = AskOptions(
            capability=capability,
            # The learner's words for the bubble, when what is sent holds attached context.
            shown=last.shown or (last.question if question != last.question else None),
            place=place,
            turn_id=new_id,
            replaces=last.id,
        )
        try:
            return session.ask(question, resolved, options)
        except BaseException:
            store.replace_turn(last.id, None)  # nothing was asked (PlanError): the old stands
            session.history = store.history(session.session_id)
            raise

    def delete_conversation(self, session_id: str) -> str:
        """Delete one of this notebook's conversations; returns the current one afterwards
        (the latest other conversation when the current one was deleted, else a new one)."""
        session = cast("_Session", self)
        store = _store(session)
        if session_id not in store.sessions_of(session.notebook):
            raise EditRefused("unknown", "No such conversation in this notebook.")
        for turn in session.running_turns():
            if turn.ctx.session_id == session_id:
                session.stop(turn.turn_id, "This conversation was deleted.")
        for row in session.pending(session_id=session_id):
            _cancel(session, row)
        store.delete_session(session_id)
        if session_id == session.session_id:
            others = session.conversations()
            if others:
                session.switch(others[-1].id)
            else:
                session.new_conversation()
        return session.session_id


def _store(session: _Session) -> Store:
    store = session._store
    if store is None:
        raise EditRefused("unknown", "The tutor's store is not open in this kernel yet.")
    return store


def _last_turn(store: Store, session_id: str, turn_id: str) -> TurnRow:
    rows = store.turns(session_id)
    if not rows:
        raise EditRefused("nothing_to_regenerate", "This conversation has no answer yet.")
    if rows[-1].id != turn_id:
        raise EditRefused(
            "not_last", "Only the last answer of the current conversation can be regenerated."
        )
    return rows[-1]


def _refuse_if_busy(session: _Session, store: Store) -> None:
    """The tail is settled only when no turn of the conversation runs and nothing waits."""
    from deeptutor_jupyter.interaction.owners import live_owner_ids

    sid = session.session_id
    here = [t for t in session.running_turns() if t.ctx.session_id == sid]
    elsewhere = store.running_turns(sid)
    if elsewhere and not here:
        # A kernel that died mid-turn left its row 'running' (marked interrupted only at the
        # next start): it must not refuse regenerate until this kernel restarts.
        live = live_owner_ids(store)
        elsewhere = [(t, owner) for t, owner in elsewhere if owner is None or owner in live]
    if here or elsewhere:
        raise EditRefused(
            "regenerate_busy",
            "A turn of this conversation is still running: wait for it or stop it, then "
            "regenerate.",
        )
    if session.pending(session_id=sid):
        raise EditRefused(
            "regenerate_busy",
            "A question of this conversation waits for your answer: answer or cancel it "
            "first, then regenerate.",
        )


def _asked(session: _Session, store: Store, turn: TurnRow) -> tuple[str, str]:
    """What the old turn sent the model (the context the learner attached included) and its
    capability (chat, solve)."""
    from deeptutor_jupyter.agent.events import TurnStarted

    question = turn.question
    for message in store.turn_messages(turn.id):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            question = str(message["content"])
            break
    events = session.replay(turn.id) or []
    started = next((e.body for e in events if isinstance(e.body, TurnStarted)), None)
    return question, started.capability if started is not None else "chat"


def _cancel(session: _Session, row: PendingRow) -> None:
    """Close a waiting call of a deleted conversation, whatever its kind."""
    from deeptutor_jupyter.interaction.coordinator import InteractionError

    if row.kind == "ask_user":
        if session._coordinator is not None:
            session._coordinator.cancel(row.request_id, DELETED)
        return
    with contextlib.suppress(InteractionError):  # closed meanwhile: nothing waits any more
        session.learning().quizzes.cancel(row.session_id, row.request_id)
