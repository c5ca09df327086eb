"""``%tutor progress``: mastery per objective, the review forecast, and what to do next.

Two outputs: the chart, then the Markdown table. One bundle holding both showed only the table:
a frontend shows one MIME type of a bundle, and JupyterLab ranks Markdown before images (issue
20). The chart is a PNG when matplotlib is installed (it is optional), else an SVG drawn here;
both render in JupyterLab, Notebook 7, VS Code and nbconvert.
"""

from __future__ import annotations

import base64
import io
import time
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.words import plural

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
        # Marks every font has: emoji show as empty boxes without an emoji font.
        marks = {"mastered": "✓", "open": "▶", "locked": "locked"}
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
    lines += [
        "",
        f"**Review:** {plural(due_now, 'card', 'cards')} due now, {week} in the next 7 days.",
    ]
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


def progress_svg(
    path: LearningPath | None, mastery: dict[str, Mastery], due_per_day: list[int]
) -> str:
    """The same two charts drawn by hand, for a kernel without matplotlib."""
    from html import escape

    objectives = path.objectives if path is not None else []
    rows = max(len(objectives), 1)
    height = max(180, 40 + 22 * rows)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="720" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        '<text x="180" y="16" font-size="13">Mastery per objective</text>',
        '<text x="480" y="16" font-size="13">Reviews due per day</text>',
    ]
    for i, o in enumerate(objectives):
        y = 30 + 22 * i
        p = mastery[o.id].p if o.id in mastery else 0.0
        parts.append(f'<text x="4" y="{y + 13}">{escape(o.title[:24])}</text>')
        parts.append(f'<rect x="150" y="{y}" width="{180 * p:.1f}" height="16" fill="#4c78a8"/>')
        parts.append(f'<text x="{154 + 180 * p:.1f}" y="{y + 13}">{p:.0%}</text>')
    top = max(due_per_day, default=0) or 1
    width = 220 / max(len(due_per_day), 1)
    for day, count in enumerate(due_per_day):
        bar = (height - 60) * count / top
        x = 470 + day * width
        parts.append(
            f'<rect x="{x:.1f}" y="{height - 30 - bar:.1f}" width="{width * 0.8:.1f}" '
            f'height="{bar:.1f}" fill="#f58518"/>'
        )
    parts.append(f'<text x="480" y="{height - 10}">days from today</text>')
    parts.append("</svg>")
    return "".join(parts)


def progress_outputs(store: LearningStore) -> list[dict[str, Any]]:
    """The chart's bundle, then the table's: each shows in every frontend."""
    from deeptutor_jupyter.runtime.learning import current_path, masteries

    found = current_path(store)
    path = found[1] if found else None
    mastery = masteries(store)
    due = forecast(store)
    due_now = len(store.cards(due_before=time.time()))
    text = progress_markdown(path, mastery, due, due_now)
    alt = "Progress chart: mastery per objective and reviews due per day (the table follows)."
    chart: dict[str, Any] = {"text/plain": alt}
    png = progress_png(path, mastery, due)
    if png is not None:
        chart["image/png"] = base64.b64encode(png).decode("ascii")
    else:
        chart["image/svg+xml"] = progress_svg(path, mastery, due)
    return [chart, {"text/markdown": text, "text/plain": text}]
