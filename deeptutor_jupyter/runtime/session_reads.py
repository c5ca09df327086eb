"""What surfaces read from a ``TutorSession``: the notebook's conversations, the turns of the
current one, a turn's events (live or saved), the notice of a read-only store. The session
offers these (``SessionReads``) so that no surface holds its store (the panel's turn list and
replays, the magics, ``pending_interactions``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deeptutor_jupyter.agent.events import Event
    from deeptutor_jupyter.messages import Message
    from deeptutor_jupyter.runtime.events import EventLog, Subscriber
    from deeptutor_jupyter.runtime.orchestrator import Turn
    from deeptutor_jupyter.store.db import Store


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str  # the learner's name for it, else their first question in their words
    turns: int
    started_at: float


@dataclass(frozen=True)
class TurnSummary:
    turn_id: str
    question: str
    status: str
    last_seq: int


def conversations(store: Store, notebook: str) -> list[Conversation]:
    """The notebook's conversations that have turns, oldest first."""
    out = []
    for session_id in store.sessions_of(notebook):
        rows = store.turns(session_id)
        if rows:
            title = store.session_title(session_id) or rows[0].said[:80]
            out.append(Conversation(session_id, title, len(rows), rows[0].created_at))
    return sorted(out, key=lambda c: c.started_at)


def is_of(store: Store, notebook: str, session_id: str) -> bool:
    return session_id in store.sessions_of(notebook)


def saved_events(store: Store, notebook: str, turn_id: str, after_seq: int) -> list[Event] | None:
    """A turn of this notebook from the store, after ``after_seq``; None if it is not one."""
    row = store.get_turn(turn_id)
    if row is None or not is_of(store, notebook, row.session_id):
        return None
    return stored_events(store, turn_id, after_seq)


def stored_events(store: Store, turn_id: str, after_seq: int = 0) -> list[Event]:
    """A turn's events read back from the store. A row no model fits (written by a version with
    a bug) is logged and left out rather than ending the replay of every row after it."""
    from pydantic import ValidationError

    from deeptutor_jupyter.agent.events import Event

    events = []
    for seq, kind, data, ts in store.events_with_time(turn_id, after_seq):
        try:
            events.append(Event.from_row(kind, seq, turn_id, data, ts))
        except ValidationError:
            log.warning("skipped the unreadable event %s #%d of turn %s", kind, seq, turn_id)
    return events


class SessionReads:
    """The reads ``TutorSession`` offers surfaces; its store stays inside."""

    notebook: str
    session_id: str
    history: list[Message]
    turns: list[Turn]
    _store: Store | None

    def turn_of(self, turn_id: str) -> Turn | None:
        """A turn this process started or resumed, the latest of that id."""
        return next((t for t in reversed(self.turns) if t.turn_id == turn_id), None)

    def take_notice(self) -> str | None:
        """What the store said once about itself (opened read-only), to show once."""
        if self._store is None or not self._store.notice:
            return None
        notice, self._store.notice = self._store.notice, None
        return notice

    def notebook_sessions(self) -> list[str]:
        """The ids of this notebook's conversations (none before the session opens)."""
        return self._store.sessions_of(self.notebook) if self._store is not None else []

    def conversations(self) -> list[Conversation]:
        """This notebook's conversations that have turns, oldest first."""
        return conversations(self._store, self.notebook) if self._store else []

    def switch(self, session_id: str) -> bool:
        """Continue one of this notebook's conversations; False if it is not one of them."""
        if self._store is None or not is_of(self._store, self.notebook, session_id):
            return False
        self.session_id = session_id
        self.history = self._store.history(session_id)
        return True

    def rename(self, session_id: str, title: str) -> bool:
        """Name one of this notebook's conversations; False if it is not one of them."""
        store = self._store
        if store is None or not is_of(store, self.notebook, session_id):
            return False
        return store.rename_session(session_id, title)

    def turn_summaries(self) -> list[TurnSummary]:
        """The turns of the current conversation, oldest first, running ones as running."""
        if self._store is None or not self.session_id:
            return []
        out = []
        for row in self._store.turns(self.session_id):
            live = self.live_log(row.id)
            last = live.last_seq if live is not None else self._store.last_seq(row.id)
            status = "running" if live is not None else row.status
            out.append(TurnSummary(row.id, row.said, status, last))
        return out

    def replay(self, turn_id: str, after_seq: int = 0) -> list[Event] | None:
        """The saved events of one of this notebook's turns; None if it is not one of them."""
        if self._store is None:
            return None
        return saved_events(self._store, self.notebook, turn_id, after_seq)

    def live_log(self, turn_id: str) -> EventLog | None:
        """The log of a turn running in this process, to follow live."""
        turn = self.turn_of(turn_id)
        if turn is not None and turn.task is not None and not turn.task.done():
            return turn.log
        return None

    def subscribe(self, turn_id: str, subscriber: Subscriber, after_seq: int = 0) -> bool:
        """Events of a turn after ``after_seq``: live when it runs here, else replayed from the
        store. Returns True when the subscription stays live."""
        live = self.live_log(turn_id)
        if live is not None:
            live.subscribe(subscriber, after_seq)
            return True
        if self._store is None:
            return False
        for event in stored_events(self._store, turn_id, after_seq):
            subscriber(event)
        return False

    def events_of(self, turn: Turn) -> list[Event]:
        """Every event of a turn, those saved before a resume in another process included."""
        first = turn.log.events[0].seq if turn.log.events else turn.log.start_seq + 1
        if first <= 1 or self._store is None:
            return list(turn.log.events)
        saved = [e for e in stored_events(self._store, turn.turn_id) if e.seq < first]
        return [*saved, *turn.log.events]
