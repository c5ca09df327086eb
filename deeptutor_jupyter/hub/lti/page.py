"""The LMS part of the instructor's page: the roster (NRPS), gradebook mappings, scores waiting.

- **Roster.** The context's members as the LMS lists them (Names and Role Provisioning
  Services), each with the hub user they launched as and their tutor requests of the last 31
  days; a member who never launched, or launched and never asked the tutor, is listed as such.
- **Gradebook.** Which notebook's quiz scores, or which objective's mastery, go to which line
  item; the instructor maps a new one (an existing line item's URL, or a label for a new
  column the service creates through AGS) or removes one.
- **Scores waiting.** Every score not yet delivered, with its attempts and the LMS's last
  error (never a token), so a failure is seen, not lost.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.hub.lti.services import LMSClient, LMSError
from deeptutor_jupyter.hub.lti.store import LineItemMap, LTIStore, ScoreRow

NEVER_LAUNCHED = "never opened the tutor (no launch from the LMS)"
NEVER_ASKED = "never opened the tutor"


@dataclass(frozen=True)
class RosterRow:
    context: str
    lti_user: str
    name: str
    roles: str
    student: str | None
    requests: int

    @property
    def status(self) -> str:
        if self.student is None:
            return NEVER_LAUNCHED
        return f"{self.requests} tutor requests" if self.requests else NEVER_ASKED


async def roster(
    store: LTIStore, client: LMSClient, requests: dict[str, int], db: Any
) -> tuple[list[RosterRow], list[str]]:
    """Every context's members, and the errors of contexts whose roster could not be read."""
    rows: list[RosterRow] = []
    errors: list[str] = []
    for context in await db(store.contexts):
        url = str(context.get("memberships") or "")
        if not url:
            continue
        cid = str(context["context_id"])
        try:
            members = await client.members(url)
        except LMSError as exc:
            errors.append(f"{cid}: {exc}")
            continue
        known = await db(store.users, cid)
        for m in members:
            user = str(m.get("user_id", ""))[:255]
            student = known.get(user)
            roles = ", ".join(str(r).rsplit("#", 1)[-1] for r in m.get("roles") or [])
            name = str(m.get("name") or m.get("given_name") or user)[:200]
            count = requests.get(student, 0) if student else 0
            rows.append(RosterRow(cid, user, name, roles[:200], student, count))
    return rows, errors


def section(
    roster_rows: list[RosterRow],
    roster_errors: list[str],
    mappings: list[LineItemMap],
    waiting: list[ScoreRow],
    contexts: list[dict[str, Any]],
    xsrf: str,
) -> str:
    e = html.escape
    members = "".join(
        f"<tr><td>{e(r.name)}</td><td>{e(r.roles)}</td><td>{e(r.student or '')}</td>"
        f"<td>{e(r.status)}</td></tr>"
        for r in roster_rows
    )
    errors = "".join(f"<p>Roster not read: {e(m)}</p>" for m in roster_errors)
    maps = "".join(
        f"<tr><td>{e(m.source)}</td><td>{e(m.kind)}</td><td>{e(m.context_id)}</td>"
        f'<td>{e(m.lineitem)}</td><td><form method="post">{xsrf}'
        '<input type="hidden" name="action" value="unmap_lineitem">'
        f'<input type="hidden" name="source" value="{e(m.source)}">'
        f'<input type="hidden" name="context" value="{e(m.context_id)}">'
        "<button>Remove</button></form></td></tr>"
        for m in mappings
    )
    scores = "".join(
        f"<tr><td>{e(s.student)}</td><td>{e(s.source)}</td><td>{s.score_given:g} / "
        f"{s.score_maximum:g}</td><td>{s.attempts}</td><td>{e(s.last_error or 'not tried yet')}"
        "</td></tr>"
        for s in waiting
    )
    options = "".join(
        f'<option value="{e(str(c["context_id"]))}">{e(str(c.get("title") or c["context_id"]))}'
        "</option>"
        for c in contexts
    )
    return f"""<h1>Your LMS course</h1>
<h2>Class roster</h2>{errors}
<table><tr><th>Name</th><th>Role</th><th>Hub user</th><th>Tutor</th></tr>{members}</table>
<h2>Gradebook</h2>
<table><tr><th>Notebook or objective</th><th>Sends</th><th>Course</th><th>Line item</th><th></th>
</tr>{maps}</table>
<form method="post">{xsrf}<input type="hidden" name="action" value="map_lineitem">
<select name="context">{options}</select>
<input name="source" placeholder="calc/kb/week1.ipynb or an objective id">
<select name="kind"><option value="quiz">quiz scores</option>
<option value="mastery">mastery</option></select>
<input name="lineitem" placeholder="line item URL, or empty"><input name="label"
placeholder="or a new column's name"><button>Send to the gradebook</button></form>
<h2>Scores waiting for the LMS</h2>
<p>{len(waiting)} not delivered yet; each is tried again with growing pauses until the LMS
takes it.</p>
<table><tr><th>Student</th><th>Notebook or objective</th><th>Score</th><th>Attempts</th>
<th>Last error</th></tr>{scores}</table>"""


class MappingRefused(DeepTutorError, ValueError):
    """A gradebook mapping the service will not make; the message is for the instructor."""

    code = "mapping_refused"


async def map_lineitem(
    store: LTIStore, client: LMSClient, db: Any, form: dict[str, str]
) -> LineItemMap:
    """The page's "Send to the gradebook" form: an existing line item of the course (same origin
    as the course's line items, so the LMS's token never goes elsewhere), or a new one."""
    from urllib.parse import urlsplit

    contexts = {str(c["context_id"]): c for c in await db(store.contexts)}
    context = contexts.get(form.get("context", ""))
    if context is None:
        raise MappingRefused("Choose a course that launched the tutor from the LMS.")
    source = form.get("source", "").strip()
    kind = form.get("kind", "quiz")
    if not source or len(source) > 500 or kind not in ("quiz", "mastery"):
        raise MappingRefused("Name a notebook (pack/path.ipynb) or an objective id.")
    lineitems = str(context.get("lineitems") or "")
    if not lineitems:
        raise MappingRefused("The LMS gave this course no gradebook service (AGS).")
    item = form.get("lineitem", "").strip()
    label = form.get("label", "").strip()[:200]
    if item:
        own, theirs = urlsplit(lineitems), urlsplit(item)
        if (theirs.scheme, theirs.netloc) != (own.scheme, own.netloc):
            raise MappingRefused("The line item must be one of this course's, on its LMS.")
    elif label:
        try:
            item = await client.create_lineitem(lineitems, label, 1.0)
        except LMSError as exc:
            raise MappingRefused(f"The LMS did not create the column: {exc}") from None
    else:
        raise MappingRefused("Give a line item's URL or a name for a new column.")
    mapping = LineItemMap(source, str(context["context_id"]), item, kind)
    await db(store.map_lineitem, mapping)
    return mapping
