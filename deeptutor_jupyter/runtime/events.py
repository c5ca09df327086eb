"""Typed turn events and the per-turn log every surface subscribes to.

The loop never prints: it emits typed events (agent/events.py) and the log stamps each with a
per-turn ``seq``. Subscribers (the turn view, the sidebar) ``match`` on them; the log persists
them so a late subscriber can replay ``after_seq``. Persistence is batched because a long answer
streams thousands of small content events.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from deeptutor_jupyter.agent.events import (
    Content,
    Event,
    Notice,
    StreamedEvent,
    Thinking,
    TurnEvent,
)
from deeptutor_jupyter.redact import StreamScrubber, scrub, usable
from deeptutor_jupyter.store.db import DiskFullError

if TYPE_CHECKING:
    from deeptutor_jupyter.store.db import Store

__all__ = ["Event", "EventLog", "EventType", "Subscriber"]

log = logging.getLogger(__name__)

EventType = Literal[
    "turn_started",
    "round_started",
    "content",
    "thinking",
    "tool_call",
    "tool_result",
    "user_input_required",
    "user_input_resolved",
    "quiz_required",
    "quiz_resolved",
    "sources",
    "notice",
    "error",
    "done",
]

Subscriber = Callable[[Event], None]


@dataclass
class EventLog:
    turn_id: str
    store: Store | None = None
    events: list[Event] = field(default_factory=list)
    _subscribers: list[Subscriber] = field(default_factory=list)
    _unsaved: list[Event] = field(default_factory=list)
    persist_error: str | None = None
    start_seq: int = 0  # a resumed turn continues the seq of its saved events
    # The keys no event may carry (redact.py); a streamed key is caught across deltas.
    secrets: list[str] = field(default_factory=list, repr=False)
    _streams: dict[tuple[type[StreamedEvent], bool], StreamScrubber] = field(
        default_factory=dict, repr=False
    )
    # Called once when the disk is full: the turn cannot keep itself and ends (orchestrator).
    on_full: Callable[[str], None] | None = field(default=None, repr=False)
    saved_seq: int = 0  # the last event known to be in the store
    # Streamed text is saved at least this often (seconds), so a long answer is kept as it
    # goes, not only at its end.
    flush_every: float = 1.0
    _flushed_at: float = field(default_factory=time.monotonic, repr=False)

    def emit(self, body: TurnEvent) -> Event | None:
        """Stamp, record and publish one event. None when a streamed delta was held back whole
        (it may be the start of a key); it is published with the next delta or the next event."""
        if self.secrets:
            if isinstance(body, Content | Thinking):
                key = (type(body), body.explore)
                stream = self._streams.setdefault(key, StreamScrubber(usable(self.secrets)))
                text = stream.feed(body.text)
                if not text:
                    return None
                if text != body.text:
                    body = body.model_copy(update={"text": text})
            else:
                self._release_held()
                body = _scrubbed(body, usable(self.secrets))
        return self._publish(body)

    def _release_held(self) -> None:
        for (kind, explore), stream in self._streams.items():
            if text := stream.flush():
                self._publish(kind(text=text, explore=True) if explore else kind(text=text))

    def _publish(self, body: TurnEvent) -> Event:
        event = Event(body, self.start_seq + len(self.events) + 1, self.turn_id, time.time())
        self.events.append(event)
        self._unsaved.append(event)
        # Content deltas are the bulk; everything else is rare and worth saving at once.
        if not isinstance(body, Content | Thinking) or (
            time.monotonic() - self._flushed_at >= self.flush_every
        ):
            self.flush()
        for sub in list(self._subscribers):
            try:
                sub(event)
            except Exception:  # a broken view must not break the turn
                log.exception("turn event subscriber failed")
        return event

    @property
    def last_seq(self) -> int:
        return self.events[-1].seq if self.events else self.start_seq

    def subscribe(self, subscriber: Subscriber, after_seq: int = 0) -> None:
        for event in self.events:
            if event.seq > after_seq:
                subscriber(event)
        self._subscribers.append(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        if subscriber in self._subscribers:
            self._subscribers.remove(subscriber)

    def retire(self) -> bool:
        """Let go of a finished turn's events once the store holds every one (issue 28: each
        finished turn kept its whole log, +31 kB of kernel RSS a turn). ``last_seq`` stays;
        readers replay them from the store (session_reads ``events_of`` and ``subscribe``).
        A log the store could not keep is left whole: memory is then its only copy."""
        if self.store is None or self._unsaved or self.saved_seq < self.last_seq:
            return False
        self.start_seq = self.last_seq
        self.events = []
        self._streams.clear()
        self._subscribers.clear()  # no event follows ``done``
        return True

    def flush(self) -> None:
        self._flushed_at = time.monotonic()
        if not self._unsaved or self.store is None:
            self._unsaved.clear()
            return
        batch, self._unsaved = self._unsaved, []
        try:
            self.store.append_events(
                (e.turn_id, e.seq, e.body.type, e.fields(), e.ts) for e in batch
            )
        except Exception as exc:
            # Keep the events in memory and say so once.
            self._unsaved = batch + self._unsaved
            first = self.persist_error is None
            self.persist_error = str(exc)
            if first and isinstance(exc, DiskFullError) and self.on_full is not None:
                self.on_full(str(exc))  # the turn ends as failed and says what was kept
            elif first:  # this emit's own flush fails too, but no longer says so
                self.emit(Notice(text=f"The events of this turn are not being saved: {exc}"))
        else:
            self.saved_seq = batch[-1].seq


def _scrubbed(body: TurnEvent, secrets: list[str]) -> TurnEvent:
    """The event with every secret replaced in its values; the same object when none was there.
    Rebuilt from only the fields its emitter set, so its stored row keeps the same keys."""
    fields = body.model_dump(exclude_unset=True)
    clean = scrub(fields, secrets)
    return body if clean is fields else type(body).model_validate(clean)
