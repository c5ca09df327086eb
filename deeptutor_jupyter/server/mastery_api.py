"""``GET /deeptutor/api/mastery``: the panel's mastery view, read-only.

The learner's objectives (their current learning path's, in order, then any a quiz checked that
is not on it) with mastery, the evidence behind it and when each one's next review is due. The
numbers are the ones ``%tutor progress`` shows (runtime/learning.py ``masteries``). Nothing here
writes: a home without a store is an empty view, not a new store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join

from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.server.api_models import MasteryObjective, MasteryReply, dump
from deeptutor_jupyter.server.handlers import TutorHandler


def mastery_view(home: Path, now: float | None = None) -> MasteryReply:
    import time

    from deeptutor_jupyter.learning.mastery import Mastery
    from deeptutor_jupyter.learning.path import current, statuses
    from deeptutor_jupyter.runtime.learning import current_path, masteries
    from deeptutor_jupyter.store.learning import LearningStore

    if not (home / "state.db").is_file():
        return MasteryReply(topic=None, objectives=[], next=None, due_now=0)
    store = LearningStore(home / "state.db")
    try:
        known = masteries(store)
        cards = store.cards()
        found = current_path(store)
    finally:
        store.close()
    due: dict[str, float] = {}
    for card in cards:  # ordered by due: the first of each objective is its next review
        due.setdefault(card.objective, card.due)
    rows: list[MasteryObjective] = []

    def row(objective: str, title: str, status: str) -> MasteryObjective:
        m = known.get(objective)
        return MasteryObjective.model_validate(
            {
                "id": objective,
                "title": title,
                "status": status,
                "mastery": m.p if m else None,
                "answers": m.n if m else 0,
                "confidence": (m or Mastery(0.0, 0)).confidence,
                "review_due": due.get(objective),
            }
        )

    topic = next_title = None
    if found is not None:
        path = found[1]
        topic = path.topic
        rows += [row(o.id, o.title, s) for o, s in statuses(path, known)]
        opened = current(path, known)
        next_title = opened.title if opened else None
    on_path = {r.id for r in rows}
    rows += [row(o, o, "other") for o in sorted({*known, *due}) if o and o not in on_path]
    moment = time.time() if now is None else now
    due_now = sum(1 for card in cards if card.due <= moment)
    return MasteryReply(topic=topic, objectives=rows, next=next_title, due_now=due_now)


class MasteryHandler(TutorHandler):
    @tornado.web.authenticated
    @authorized
    def get(self) -> None:
        # The settings, not learner(): opening the learner's store would create one.
        self.reply(dump(mastery_view(resolve_settings().settings.home)))


def handlers(base: str) -> list[tuple[str, Any]]:
    return [(url_path_join(base, "mastery"), MasteryHandler)]
