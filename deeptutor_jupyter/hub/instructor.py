"""The instructor's page and the students' own numbers.

- ``{prefix}v1/usage``: a student's own usage (token auth, like the gateway). There is no way to
  name another student here: B asking for A gets a 403.
- ``{prefix}v1/mastery``: a student's kernel reports mastery per course objective, numbers in
  [0, 1] only, bounded and rate limited (hub/mastery.py).
- ``{prefix}instructor/``: hub OAuth (HubOAuthenticated), instructors only (``instructors`` names
  or ``instructor_groups``): usage per student, per-student limits, mastery per objective as
  hub/mastery.py releases it, forgetting an objective's or a student's mastery rows;
  ``usage.csv`` exports the usage.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import io
from collections import defaultdict
from typing import Any

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from tornado.web import HTTPError, RequestHandler, authenticated

from deeptutor_jupyter.hub.gateway import ApiHandler, GatewayState
from deeptutor_jupyter.hub.mastery import (
    MASTERED_ANSWERS,
    MASTERED_P,
    MasteryRow,
    mastery_values,
)
from deeptutor_jupyter.hub.packs import PackInfo
from deeptutor_jupyter.hub.quota import DayRow, UsageRow
from deeptutor_jupyter.hub.settings import Limits


def _usage_json(rows: list[UsageRow]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(row) for row in rows]


class OwnUsageHandler(ApiHandler):
    async def get(self) -> None:
        identity = await self.identify()
        if identity is None:
            return
        asked = self.get_argument("student", identity.name)
        if asked != identity.name:
            self.fail(403, "not_yours", "You can see your own usage only.")
            return
        rows = await self.state.db(self.state.quota.usage, identity.name)
        limits = await self.state.limits_for(identity)
        used, held = await self.state.db(self.state.quota.today, identity.name)
        self.finish(
            {
                "student": identity.name,
                "used_today": used,
                "held_now": held,
                "limits": limits.model_dump(),
                "usage": _usage_json(rows),
            }
        )


class MasteryReportHandler(ApiHandler):
    """Reports bounded as hub/mastery.py says; a student sending too often gets a 429."""

    async def post(self) -> None:
        identity = await self.identify()
        if identity is None:
            return
        state = self.state
        wait = await state.db(state.reports.wait_for, identity.name, "mastery")
        if wait:
            self.fail(429, "rate_limited", "Too many mastery reports; try later.", wait)
            return
        objectives = await state.db(state.packs.objectives) if state.packs else set()
        values = mastery_values(self.request.body, objectives)
        if isinstance(values, str):
            self.fail(400, "invalid_mastery", values)
            return
        await state.db(state.mastery.report, identity.name, values)
        if state.lti is not None:
            await state.db(queue_mastery, state.lti.store, identity.name, values)
            state.lti.outbox(state.session()).kick()
        if state.xapi is not None:
            await state.db(state.xapi.progressed, identity.name, values)
        self.finish({"stored": len(values)})


def queue_mastery(store: Any, student: str, values: dict[str, tuple[float, int]]) -> int:
    """An objective mapped to a line item sends its mastery as the score: completed once
    mastered (hub/mastery.py's rule), in progress before."""
    queued = 0
    for objective, (p, n) in values.items():
        done = p >= MASTERED_P and n >= MASTERED_ANSWERS
        queued += store.queue_score(student, objective, "mastery", p, 1.0, completed=done)
    return int(queued)


class InstructorHandler(HubOAuthenticated, RequestHandler):  # type: ignore[misc]
    state: GatewayState

    def initialize(self, state: GatewayState) -> None:
        self.state = state

    def instructor(self) -> str:
        user: dict[str, Any] | None = self.current_user
        if not user:  # pragma: no cover - @authenticated redirects before
            raise HTTPError(403)
        name = str(user.get("name", ""))
        if user.get("kind", "user") != "user" or not self.state.config.is_instructor(
            name, tuple(user.get("groups") or ())
        ):
            raise HTTPError(403, "only the course's instructors may see this page")
        return name

    async def totals(self) -> dict[str, dict[str, int]]:
        rows: list[UsageRow] = await self.state.db(self.state.quota.usage, None)
        out: dict[str, dict[str, int]] = defaultdict(
            lambda: {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )
        for row in rows:
            t = out[row.student]
            t["requests"] += row.requests
            t["prompt_tokens"] += row.prompt_tokens
            t["completion_tokens"] += row.completion_tokens
        return dict(out)


class InstructorPage(InstructorHandler):
    @authenticated
    async def get(self) -> None:
        self.instructor()
        totals = await self.totals()
        overrides = await self.state.db(self.state.quota.overrides)
        mastery = await self.state.db(
            self.state.mastery.by_objective, self.state.config.min_group_size
        )
        packs = await self.state.db(self.state.packs.latest) if self.state.packs else []
        today = await self.state.db(self.state.quota.today_all)
        xsrf = self.xsrf_form_html()
        lms = await self.lms_section(totals, xsrf) if self.state.lti is not None else ""
        if self.state.xapi is not None:
            waiting, error = await self.state.db(self.state.xapi.status)
            said = f" Last error: {html.escape(error)}." if error else ""
            lms += f"<h2>Learning records</h2><p>{waiting} statements wait for the LRS.{said}</p>"
        body = _page(self.state, totals, overrides, mastery, packs, xsrf, today)
        policies = await self.policy_section(xsrf)
        self.finish(body + policies + lms + "</body></html>")

    async def policy_section(self, xsrf: str) -> str:
        from deeptutor_jupyter.hub.policy_page import help_section, section

        store, least = self.state.group_policy, self.state.config.min_group_size
        helped = await self.state.db(self.state.hints.by_exercise, least)
        policies = section(await self.state.db(store.all), await self.state.db(store.audit), xsrf)
        return policies + help_section(helped, least)

    async def set_policy(self, action: str) -> None:
        """The page's policy form: set a group's policy (its YAML) or clear it."""
        from deeptutor_jupyter.learning.policy import PolicyError

        who = self.instructor()
        group = self.get_body_argument("group", "").strip()
        text = self.get_body_argument("policy", "") if action == "set_policy" else None
        try:
            await self.state.db(self.state.group_policy.set, group, text or None, who)
        except PolicyError as exc:
            self.set_status(400)
            self.finish(
                f"<!doctype html><p>{html.escape(str(exc))}</p><p>Nothing was changed. "
                f'<a href="{html.escape(self.request.path)}">Back</a></p>'
            )
            return
        self.state.forget_policies()  # the next request on this replica follows it
        self.redirect(self.request.path)

    async def lms_section(self, totals: dict[str, dict[str, int]], xsrf: str) -> str:
        from deeptutor_jupyter.hub.lti import page

        lti = self.state.lti
        assert lti is not None
        requests = {name: t["requests"] for name, t in totals.items()}
        db = self.state.db
        rows, errors = await page.roster(lti.store, lti.client(self.state.session()), requests, db)
        return page.section(
            rows,
            errors,
            await db(lti.store.lineitems),
            await db(lti.store.undelivered),
            await db(lti.store.contexts),
            xsrf,
        )

    async def lms_action(self, action: str) -> None:
        from deeptutor_jupyter.hub.lti import page

        lti = self.state.lti
        if lti is None:
            raise HTTPError(404, "this course has no LMS")
        form = {
            k: self.get_body_argument(k, "")
            for k in ("context", "source", "kind", "lineitem", "label")
        }
        if action == "unmap_lineitem":
            await self.state.db(lti.store.unmap_lineitem, form["source"], form["context"])
        else:
            try:
                await page.map_lineitem(
                    lti.store, lti.client(self.state.session()), self.state.db, form
                )
            except page.MappingRefused as exc:
                self.set_status(400)
                self.finish(
                    f"<!doctype html><p>{html.escape(str(exc))}</p>"
                    f'<p><a href="{html.escape(self.request.path)}">Back</a></p>'
                )
                return
        self.redirect(self.request.path)

    @authenticated
    async def post(self) -> None:
        """The page's forms: a student's limits, or forgetting mastery rows."""
        self.instructor()
        action = self.get_body_argument("action", "limits")
        if action in ("map_lineitem", "unmap_lineitem"):
            await self.lms_action(action)
            return
        if action in ("set_policy", "clear_policy"):
            await self.set_policy(action)
            return
        if action == "forget_objective":
            objective = self.get_body_argument("objective", "").strip()
            if not objective:
                raise HTTPError(400, "name the objective")
            await self.state.db(self.state.mastery.forget_objective, objective)
            self.redirect(self.request.path)
            return
        student = self.get_body_argument("student", "").strip()
        if not student:
            raise HTTPError(400, "name the student")
        if action == "forget_student":
            await self.state.db(self.state.mastery.forget_student, student)
        elif action == "reset_day":
            await self.state.db(self.state.quota.reset_day, student)
        elif self.get_body_argument("reset", ""):
            await self.state.db(self.state.quota.set_student_override, student, None)
        else:
            limits = Limits(
                daily_tokens=_int_or_none(self.get_body_argument("daily_tokens", "")),
                requests_per_minute=_int_or_none(self.get_body_argument("requests_per_minute", "")),
            )
            await self.state.db(self.state.quota.set_student_override, student, limits)
        self.state.forget_override(student)
        self.redirect(self.request.path)


def _int_or_none(text: str) -> int | None:
    text = text.strip().replace("_", "").replace(",", "")
    if not text:
        return None
    if not text.isdigit():
        raise HTTPError(400, "limits are whole numbers, or empty for no limit")
    return int(text)


class UsageCsvHandler(InstructorHandler):
    @authenticated
    async def get(self) -> None:
        self.instructor()
        rows = await self.state.db(self.state.quota.usage, None)
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(
            ["day", "student", "model", "requests", "prompt_tokens", "completion_tokens"]
        )
        for r in rows:
            writer.writerow(
                [r.day, r.student, r.model, r.requests, r.prompt_tokens, r.completion_tokens]
            )
        self.set_header("Content-Type", "text/csv; charset=utf-8")
        self.set_header("Content-Disposition", 'attachment; filename="tutor-usage.csv"')
        self.finish(buffer.getvalue())


class InstructorJsonHandler(InstructorHandler):
    @authenticated
    async def get(self) -> None:
        self.instructor()
        mastery = await self.state.db(
            self.state.mastery.by_objective, self.state.config.min_group_size
        )
        overrides = await self.state.db(self.state.quota.overrides)
        today = await self.state.db(self.state.quota.today_all)
        least = self.state.config.min_group_size
        helped = await self.state.db(self.state.hints.by_exercise, least)
        self.finish(
            {
                "today": {r.student: dataclasses.asdict(r) for r in today},
                "usage": await self.totals(),
                "limits": self.state.config.limits.model_dump(),
                "overrides": {k: v.model_dump() for k, v in overrides.items()},
                "mastery": [
                    {**dataclasses.asdict(row), "hidden": row.mean is None} for row in mastery
                ],
                "help_seeking": [
                    {**dataclasses.asdict(row), "hidden": row.hints is None} for row in helped
                ],
            }
        )


def _page(
    state: GatewayState,
    totals: dict[str, dict[str, int]],
    overrides: dict[str, Limits],
    mastery: list[MasteryRow],
    packs: list[PackInfo],
    xsrf: str,
    today: list[DayRow],
) -> str:
    e = html.escape
    today_rows = "".join(
        f"<tr><td>{e(r.student)}</td><td>{r.used}</td><td>{r.held}</td><td>{r.refused}</td>"
        f'<td><form method="post">{xsrf}<input type="hidden" name="action" value="reset_day">'
        f'<input type="hidden" name="student" value="{e(r.student)}">'
        "<button>Give today's budget back</button></form></td></tr>"
        for r in today
    )
    default = state.config.limits
    rows = "".join(
        f"<tr><td>{e(name)}</td><td>{t['requests']}</td><td>{t['prompt_tokens']}</td>"
        f"<td>{t['completion_tokens']}</td><td>{e(_limits_text(overrides.get(name)))}</td></tr>"
        for name, t in sorted(totals.items())
    )
    hidden = f"waiting for {state.config.min_group_size} students' reports"
    mastery_rows = "".join(
        f"<tr><td>{e(r.objective)}</td><td>{r.students}</td>"
        + (
            f"<td>{hidden}</td><td></td>"
            if r.mean is None
            else f"<td>{r.mean:.2f}</td><td>{r.mastered} of {r.shown_students}</td>"
        )
        + f'<td><form method="post">{xsrf}<input type="hidden" name="action" '
        f'value="forget_objective"><input type="hidden" name="objective" '
        f'value="{e(r.objective)}"><button>Forget</button></form></td></tr>'
        for r in mastery
    )
    pack_rows = "".join(
        f"<tr><td>{e(p.name)}</td><td>{e(p.audience if p.audience != '*' else 'everyone')}</td>"
        f"<td>{p.version}</td><td>{len(p.files)}</td><td>{e(p.published_by)}</td>"
        f"<td>{e(p.published_at)}</td></tr>"
        for p in packs
    )
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Tutor: your course</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:.2em .8em;text-align:left}}</style>
</head><body><h1>Today (UTC)</h1>
<table><tr><th>Student</th><th>Tokens used</th><th>Held by running answers</th>
<th>Refused requests</th><th></th></tr>{today_rows}</table>
<h1>Tutor usage, last 31 days</h1>
<p>Course default: {e(_limits_text(default))}. <a href="usage.csv">Export CSV</a></p>
<table><tr><th>Student</th><th>Requests</th><th>Prompt tokens</th><th>Answer tokens</th>
<th>Own limits</th></tr>{rows}</table>
<h2>Set a student's limits</h2>
<form method="post">{xsrf}<input name="student" placeholder="student">
<input name="daily_tokens" placeholder="tokens a day"><input name="requests_per_minute"
placeholder="requests a minute"><button>Save</button>
<button name="reset" value="1">Back to the default</button></form>
<h2>Mastery per objective</h2>
<p>A mean is computed again only after {state.config.min_group_size} students have reported
since the last one, so no single student's value can be worked out from two means.</p>
<table><tr><th>Objective</th><th>Students</th><th>Mean</th><th>Mastered</th><th></th></tr>
{mastery_rows}</table>
<form method="post">{xsrf}<input type="hidden" name="action" value="forget_student">
<input name="student" placeholder="student"><button>Forget this student's mastery</button></form>
<h2>Course packs</h2><p>Publish a folder from a terminal of your hub server:
<code>deeptutor-jupyter course publish FOLDER --group GROUP</code> (docs/hub.md).</p>
<table><tr><th>Pack</th><th>For</th><th>Version</th><th>Files</th><th>By</th><th>When</th></tr>
{pack_rows}</table>"""


def _limits_text(limits: Limits | None) -> str:
    if limits is None:
        return "course default"
    day = "no daily limit" if limits.daily_tokens is None else f"{limits.daily_tokens} tokens/day"
    rpm = limits.requests_per_minute
    minute = "no rate limit" if rpm is None else f"{rpm} requests/minute"
    return f"{day}, {minute}"


def student_routes(prefix: str, state: GatewayState) -> list[Any]:
    args = {"state": state}
    return [
        (prefix + "v1/usage", OwnUsageHandler, args),
        (prefix + "v1/mastery", MasteryReportHandler, args),
    ]


class ServiceRoot(RequestHandler):
    """The hub's Services menu links to the service's root: send the visitor to the page."""

    def get(self) -> None:
        self.redirect(self.request.path.rstrip("/") + "/instructor/")


def instructor_routes(prefix: str, state: GatewayState) -> list[Any]:
    args = {"state": state}
    return [
        (prefix.rstrip("/") + "/?", ServiceRoot),
        (prefix + "oauth_callback", HubOAuthCallbackHandler),
        (prefix + "instructor/?", InstructorPage, args),
        (prefix + "instructor/usage.csv", UsageCsvHandler, args),
        (prefix + "instructor/summary.json", InstructorJsonHandler, args),
    ]
