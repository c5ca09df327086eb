"""``GET /deeptutor/api/mastery`` on a real server and a real state.db: the learner's objectives
with mastery and next review, read-only, and honest when there is nothing yet."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from deeptutor_jupyter.learning.path import LearningPath
from deeptutor_jupyter.store.learning import LearningStore


def mastery(run: Any, jp_fetch: Any) -> dict[str, Any]:
    reply = run(jp_fetch("deeptutor", "api", "mastery"))
    return dict(json.loads(reply.body))


def test_no_learning_path_yet_is_said_and_no_store_is_made(
    run: Any, jp_fetch: Any, home: Path
) -> None:
    assert mastery(run, jp_fetch) == {"topic": None, "objectives": [], "next": None, "due_now": 0}
    assert not (home / "state.db").exists()  # a read never creates the learner's store


def test_objectives_show_mastery_evidence_and_the_next_review(
    run: Any, jp_fetch: Any, home: Path
) -> None:
    home.mkdir(parents=True)
    store = LearningStore(home / "state.db")
    path = LearningPath.model_validate(
        {
            "topic": "Linear algebra",
            "objectives": [
                {"id": "rank", "title": "The rank $r(A)$"},
                {"id": "det", "title": "**Determinants**"},
            ],
        }
    )
    try:
        store.save_path("p1", path.topic, path.model_dump())
        store.add_evidence([("rank", "q1", f"a{i}", 1.0, 0.25) for i in range(4)])
        store.add_evidence([("loops", "q2", "b1", 0.0, 0.25)])  # a quiz's objective off the path
        due = time.time() + 86400
        store.save_card(store.new_card_id("rank", {"id": "a1"}), {"s": 1}, due, 3, {})
    finally:
        store.close()

    view = mastery(run, jp_fetch)
    assert (view["topic"], view["next"], view["due_now"]) == (
        "Linear algebra",
        "**Determinants**",
        0,
    )
    rank, det, loops = view["objectives"]
    assert (rank["id"], rank["title"], rank["status"]) == ("rank", "The rank $r(A)$", "mastered")
    assert rank["mastery"] > 0.9 and rank["answers"] == 4 and rank["review_due"] == due
    assert (det["status"], det["mastery"], det["review_due"]) == ("open", None, None)
    assert det["confidence"] == "no evidence yet"
    assert (loops["id"], loops["status"], loops["answers"]) == ("loops", "other", 1)
