"""The session's watcher: the owner's heartbeat and the answers given in other processes.

One task per session, alive only while something needs it (a turn running here, a card following
a question whose turn runs elsewhere). While turns run, the owner's heartbeat beats on a thread of
its own (interaction/owners.py ``Heartbeat``: a long blocking cell must not make this process
look gone, so other kernels leave its questions to it); each tick the task asks the coordinator
to pick up answers committed by other processes and tells the watched cards how their questions
moved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deeptutor_jupyter.interaction.coordinator import InteractionCoordinator
    from deeptutor_jupyter.interaction.owners import Heartbeat, Owner
    from deeptutor_jupyter.store.db import QuestionState, Store

WATCH_INTERVAL = 0.25  # seconds between looks for answers given in another process


class Watcher:
    def __init__(
        self,
        store: Store,
        coordinator: InteractionCoordinator,
        owner: Owner | None,
        running: Callable[[], int],
    ) -> None:
        self._store = store
        self._coordinator = coordinator
        self._owner = owner
        self._running = running  # how many turns run in this process now
        self._task: asyncio.Task[None] | None = None
        # Cards of questions whose turn runs elsewhere: request id -> what to tell them.
        self._watched: dict[str, Callable[[QuestionState], bool]] = {}
        self._seen_version = -1
        self.heartbeat: Heartbeat | None = None  # set while the task runs and has an owner

    def start(self) -> None:
        """Start watching if a loop runs here and no watch runs yet."""
        if self._task is not None and not self._task.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._task = loop.create_task(self._loop())

    def follow(self, request_id: str, update: Callable[[QuestionState], bool]) -> None:
        """Tell ``update`` how a question whose turn runs elsewhere moves on (answered there,
        expired, its turn finished) until it returns True (nothing more to follow)."""
        self._watched[request_id] = update
        self._seen_version = -1  # look at once, then only when another process commits
        self.start()

    def stop_if_idle(self) -> None:
        if not self._busy() and self._task is not None:
            self._task.cancel()
            self._task = None

    def _busy(self) -> bool:
        return bool(self._running() or self._watched)

    def _poll_watched(self) -> None:
        version = self._store.data_version()
        if not self._watched or version == self._seen_version:
            return
        self._seen_version = version
        for request_id, state in self._store.question_states(list(self._watched)).items():
            update = self._watched.get(request_id)
            if update is not None and update(state):
                self._watched.pop(request_id, None)

    async def _loop(self) -> None:
        from deeptutor_jupyter.interaction.owners import Heartbeat

        beat = self.heartbeat = Heartbeat(self._store, self._owner) if self._owner else None
        try:
            while self._busy():
                if beat is not None and self._running():
                    beat.start()  # a fresh row (even if it was tidied away) while turns run
                elif beat is not None:
                    beat.stop()
                try:
                    self._coordinator.poll_remote()
                    self._poll_watched()
                except Exception:  # a locked or full store: look again next time
                    pass
                await asyncio.sleep(WATCH_INTERVAL)
        finally:
            if beat is not None:
                beat.stop()
