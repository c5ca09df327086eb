"""``POST v1/scores``: a student's kernel reports a graded quiz or review, numbers only.

- ``{"kind": "quiz", "notebook": "calc/kb/week1.ipynb", "score": 2, "maximum": 3}``: a course
  notebook's quiz (the pack notebook the student's copy is of, runtime/course.py). It is queued
  for the notebook's LMS line item (hub/lti/outbox.py) and becomes ``answered`` and
  ``completed`` learning records (hub/xapi.py).
- ``{"kind": "review", "objective": "limits", "score": 1, "maximum": 1}``: a spaced review of a
  course objective (only the course's: a learner's own objectives' names say what they study);
  it becomes an ``answered`` record, and no grade.

Typed and bounded (hub token, at most 10 reports a minute per student and replica); the route
exists when the course has an LMS or an LRS.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deeptutor_jupyter.hub.gateway import ApiHandler, GatewayState

MAX_REPORT_BYTES = 4096


class ScoreReport(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    kind: Literal["quiz", "review"] = "quiz"
    notebook: str | None = Field(None, min_length=1, max_length=500, pattern=r"^[\w.@+/ -]+$")
    objective: str | None = Field(None, min_length=1, max_length=255)
    score: float = Field(ge=0, le=10_000)
    maximum: float = Field(gt=0, le=10_000)


class ScoreReportHandler(ApiHandler):
    async def post(self) -> None:
        identity = await self.identify()
        if identity is None:
            return
        wait = await self.state.db(self.state.reports.wait_for, identity.name, "score")
        if wait:
            self.fail(429, "rate_limited", "Too many score reports; try later.", wait)
            return
        report = await self.report()
        if report is None:
            return
        lti, records = self.state.lti, self.state.xapi
        queued = 0
        if report.kind == "review":
            assert report.objective is not None
            if records is not None:
                await self.state.db(
                    records.review, identity.name, report.objective, report.score, report.maximum
                )
            self.finish({"queued": 0})
            return
        notebook = str(report.notebook)
        if lti is not None:
            queued = await self.state.db(
                lambda: lti.store.queue_score(
                    identity.name, notebook, "quiz", report.score, report.maximum, completed=True
                )
            )
            if queued:
                lti.outbox(self.state.session()).kick()
        if records is not None:
            await self.state.db(records.quiz, identity.name, notebook, report.score, report.maximum)
        self.finish({"queued": queued})

    async def report(self) -> ScoreReport | None:
        """The typed report, or None after a 400 that says what is wrong."""
        if len(self.request.body) > MAX_REPORT_BYTES:
            self.fail(413, "invalid_score", "A score report is a few numbers; this is too long.")
            return None
        try:
            report = ScoreReport.model_validate_json(self.request.body or b"{}")
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            self.fail(400, "invalid_score", f"{where}: {first['msg']}")
            return None
        problem = await self.problem(report)
        if problem:
            self.fail(400, "invalid_score", problem)
            return None
        return report

    async def problem(self, report: ScoreReport) -> str:
        if report.score > report.maximum:
            return "score may not be above maximum."
        if report.kind == "quiz":
            return "" if report.notebook else "A quiz's report names its notebook."
        packs = self.state.packs
        objectives = await self.state.db(packs.objectives) if packs is not None else set()
        if report.objective not in objectives:
            return "A review's report names one of the course's objectives."
        return ""


def score_routes(prefix: str, state: GatewayState) -> list[Any]:
    """``v1/scores``: for the LMS gradebook, the learning records, or both."""
    return [(prefix + "v1/scores", ScoreReportHandler, {"state": state})]
