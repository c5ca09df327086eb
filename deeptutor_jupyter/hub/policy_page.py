"""The instructor page's section for the groups' AI policies: each group's policy, a form to
set or clear one, and the audit log of changes (who, when, old → new)."""

from __future__ import annotations

import html

from deeptutor_jupyter.hub.group_policy import AuditRow
from deeptutor_jupyter.hub.hints import HelpRow

EXAMPLE = """- mode: "off"
  reason: Midterm exam
  until: 2026-12-10T11:00:00+01:00
- mode: hints
  hints: 3"""


def section(policies: dict[str, str], audit: list[AuditRow], xsrf: str) -> str:
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(group)}</td><td><pre>{e(text)}</pre></td><td>"
        f'<form method="post">{xsrf}<input type="hidden" name="action" value="clear_policy">'
        f'<input type="hidden" name="group" value="{e(group)}"><button>Clear</button></form>'
        "</td></tr>"
        for group, text in sorted(policies.items())
    )
    log = "".join(
        f"<tr><td>{e(r.at)}</td><td>{e(r.who)}</td><td>{e(r.group)}</td>"
        f"<td><pre>{e(r.old) or '(none)'}</pre></td>"
        f"<td><pre>{e(r.new) or '(cleared)'}</pre></td></tr>"
        for r in audit
    )
    return f"""<h2>AI policy per group</h2>
<p>A group's policy here replaces its packs' TUTOR.md policies at the course service, from the
next request (docs/policy.md). Times need an offset (<code>+01:00</code> or <code>Z</code>).
From a terminal: <code>deeptutor-jupyter course policy GROUP --file policy.yaml</code>.</p>
<table><tr><th>Group</th><th>Policy</th><th></th></tr>{rows}</table>
<form method="post">{xsrf}<input type="hidden" name="action" value="set_policy">
<input name="group" placeholder="hub group"><br>
<textarea name="policy" rows="6" cols="60" placeholder="{e(EXAMPLE)}"></textarea><br>
<button>Set the group's policy</button></form>
<h3>Changes</h3>
<table><tr><th>When (UTC)</th><th>Who</th><th>Group</th><th>Before</th><th>After</th></tr>
{log}</table>"""


def help_section(rows: list[HelpRow], min_students: int) -> str:
    """Help-seeking per exercise: numbers only, released as mastery is (hub/hints.py)."""
    e = html.escape
    hidden = f"<td colspan=3>waiting for {min_students} students</td>"
    body = "".join(
        f"<tr><td>{e(r.exercise or '(no exercise named)')}</td><td>{r.students}</td>"
        + (
            hidden
            if r.hints is None
            else f"<td>{r.hints} (of {r.shown_students} students)</td>"
            f"<td>{r.mean_depth:.1f}</td><td>{r.deepest}</td>"
        )
        + "</tr>"
        for r in rows
    )
    return f"""<h2>Help-seeking per exercise</h2>
<p>Under a <code>hints</code> policy, counted by the course service. Figures are computed again
only after {min_students} students have asked for a new hint since the last one, so no
student's numbers can be worked out.</p>
<table><tr><th>Exercise</th><th>Students who asked</th><th>Hints asked</th>
<th>Mean ladder depth reached</th><th>Deepest</th></tr>{body}</table>"""
