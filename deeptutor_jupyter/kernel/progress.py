"""``%tutor progress``: mastery per objective, the review forecast, and what to do next.

One output bundle: a PNG chart when matplotlib is installed (it is optional), always with a
Markdown table beside it, which is what a saved notebook shows on GitHub or without matplotlib.
"""

from __future__ import annotations

import base64
import io
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deeptutor_jupyter.learning.mastery import Mastery
    from deeptutor_jupyter.learning.path import LearningPath
    from deeptutor_jupyter.store.learning import LearningStore

FORECAST_DAYS = 14


def forecast(
    store: LearningStore, days: int = FORECAST_DAYS, now: float | None = None
) -> list[int]:
    """Cards due per day from today: index 0 also holds everything overdue."""
    now = time.time() if now is None else now
    counts = [0] * days
    for card in store.cards():
        day = int(max(0.0, card.due - now) // 86400)
        if day < days:
            counts[day] += 1
    return counts


def progress_markdown(
    path: LearningPath | None, mastery: dict[str, Mastery], due_per_day: list[int], due_now: int
) -> str:
    from deeptutor_jupyter.learning.path import current, statuses

    lines = []
    if path is None:
        lines.append("No learning path yet: start one with `%tutor learn <topic>`.")
    else:
        lines += [f"**Learning path:** {path.topic}", "", "| | Objective | Mastery | Evidence |"]
        lines.append("|---|---|---|---|")
        marks = {"mastered": "✅", "open": "▶", "locked": "🔒"}
        for objective, status in statuses(path, mastery):
            m = mastery.get(objective.id)
            shown = f"{m.p:.0%}" if m else "–"
            evidence = m.confidence if m else "no evidence yet"
            lines.append(f"| {marks[status]} | {objective.title} | {shown} | {evidence} |")
        now = current(path, mastery)
        lines.append("")
        lines.append(
            f"**Next:** `%tutor learn` to work on *{now.title}*."
            if now
            else "**Next:** every objective is mastered; keep it fresh with `%tutor review`."
        )
    week = sum(due_per_day[:7])
    lines += ["", f"**Review:** {due_now} card(s) due now, {week} in the next 7 days."]
    if due_now:
        lines.append("Run `%tutor review` to do them.")
    return "\n".join(lines)


def progress_png(
    path: LearningPath | None, mastery: dict[str, Mastery], due_per_day: list[int]
) -> bytes | None:
    """Two small charts, or None without matplotlib (it is not a dependency)."""
    try:
        # A Figure without pyplot: the learner's own backend and figures stay untouched.
        from matplotlib.figure import Figure
    except ImportError:
        return None
    fig = Figure(figsize=(9, 3))
    left, right = fig.subplots(1, 2)
    if path is not None:
        titles = [o.title[:24] for o in path.objectives]
        values = [mastery[o.id].p if o.id in mastery else 0.0 for o in path.objectives]
        left.barh(titles[::-1], values[::-1], color="#4c78a8")
        left.axvline(0.85, color="#999", linestyle="--", linewidth=1)
        left.set_xlim(0, 1)
    left.set_title("Mastery per objective")
    right.bar(range(len(due_per_day)), due_per_day, color="#f58518")
    right.set_title("Reviews due per day")
    right.set_xlabel("days from today")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    return buffer.getvalue()


def progress_bundle(store: LearningStore) -> dict[str, Any]:
    from deeptutor_jupyter.runtime.learning import current_path, masteries

    found = current_path(store)
    path = found[1] if found else None
    mastery = masteries(store)
    due = forecast(store)
    due_now = len(store.cards(due_before=time.time()))
    text = progress_markdown(path, mastery, due, due_now)
    bundle: dict[str, Any] = {"text/markdown": text, "text/plain": text}
    png = progress_png(path, mastery, due)
    if png is not None:
        bundle["image/png"] = base64.b64encode(png).decode("ascii")
    return bundle
