"""Grades to the LMS (AGS), in process: the course service's app on loopback with a token table
instead of the hub, and the LTI platform of lti_platform.py as the LMS (real JWTs, real HTTP).

A score is queued in the service's SQLite store when the kernel reports it, posted with the
AGS fields, retried with backoff when the LMS fails, delivered once, and still queued after a
restart of the service.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from deeptutor_jupyter.hub.instructor import queue_mastery
from deeptutor_jupyter.hub.lti.outbox import Outbox, backoff, deliver_due
from deeptutor_jupyter.hub.lti.page import (
    NEVER_LAUNCHED,
    MappingRefused,
    map_lineitem,
    roster,
    section,
)
from deeptutor_jupyter.hub.lti.store import LineItemMap, LTIStore
from deeptutor_jupyter.runtime.course import course_notebook, send_quiz_score
from tests.hub.inproc import Service, start_service, stop_service
from tests.hub.lti_platform import LTIPlatform, Member, new_rsa_key, pem_of

NOTEBOOK = "calc/kb/week1.ipynb"


@pytest.fixture(scope="module")
def lms() -> Iterator[LTIPlatform]:
    with LTIPlatform() as platform:
        yield platform


@pytest.fixture(scope="module")
def tool_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tool") / "tool.pem"
    path.write_bytes(pem_of(new_rsa_key()))
    os.chmod(path, 0o600)
    return path


@pytest.fixture
async def service(tmp_path: Path, lms: LTIPlatform, tool_key: Path) -> AsyncIterator[Service]:
    state, server, url = start_service(tmp_path / "hub.sqlite", lms, tool_key)
    assert state.lti is not None
    async with aiohttp.ClientSession() as http:
        yield Service(url, state, state.lti, http)
    await stop_service(state, server)


async def launch(service: Service, student: str, sub: str, lineitem: str | None = None) -> None:
    """The hub's note for a launch, followed as the browser follows it."""
    body = {
        "message": "LtiResourceLinkRequest",
        "lti_user": sub,
        "context": {"id": "calc-101", "label": "CALC-101", "title": "Calculus"},
        "instructor": False,
        "notebook": NOTEBOOK,
        "lineitem": lineitem or "",
        "lineitems": "",
        "memberships": "",
    }
    note = service.lti.config.note(student, body)
    status, _, headers = await service.call("GET", f"lti/launch?note={note}")
    assert status == 302
    assert headers["Location"].endswith("deeptutor/course/open?notebook=calc%2Fkb%2Fweek1.ipynb")


def later(seconds: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)


async def test_a_quiz_score_reaches_the_gradebook_once_after_a_500(
    service: Service, lms: LTIPlatform
) -> None:
    item = lms.add_line_item("calc-101", "Week 1")
    await launch(service, "alice", "stu-ada", lineitem=item)
    lms.fail_scores.append(500)
    report = {"notebook": NOTEBOOK, "score": 3, "maximum": 4}
    status, text, _ = await service.call("POST", "v1/scores", "student-alice", json=report)
    assert (status, text) == (200, '{"queued": 1}')

    client = service.lti.client(service.state.session())
    store = service.lti.store
    assert await deliver_due(store, client, later(0)) == (0, 1)
    (waiting,) = store.undelivered()
    assert waiting.attempts == 1 and waiting.last_error.startswith("HTTP 500 from the LMS")
    # Not before its backoff; then once, and never again.
    assert await deliver_due(store, client, later(backoff(1) - 2)) == (0, 0)
    assert await deliver_due(store, client, later(backoff(1) + 1)) == (1, 0)
    assert await deliver_due(store, client, later(backoff(5))) == (0, 0)
    path = item.removeprefix(lms.url)
    (score,) = lms.scores[path]
    assert score["userId"] == "stu-ada"
    assert (score["scoreGiven"], score["scoreMaximum"]) == (3, 4)
    assert (score["activityProgress"], score["gradingProgress"]) == ("Completed", "FullyGraded")
    assert score["timestamp"].endswith("+00:00")
    posts = lms.service_requests("/scores")
    assert len(posts) == 2  # the 500, then the one delivered
    assert posts[-1].headers["content-type"] == "application/vnd.ims.lis.v1.score+json"
    # The token the LMS gave is used for the scores, and written nowhere in the store.
    token = posts[-1].headers["authorization"].removeprefix("Bearer ")
    assert token in lms.tokens
    assert all(token not in row.last_error for row in store.all_scores())


async def test_the_queue_survives_a_restart_of_the_service(
    tmp_path: Path, lms: LTIPlatform, tool_key: Path
) -> None:
    db = tmp_path / "hub.sqlite"
    state, server, _ = start_service(db, lms, tool_key)
    assert state.lti is not None
    item = lms.add_line_item("calc-101", "Week 2")
    launch_body = {"context": {"id": "calc-101"}, "lti_user": "stu-bo", "notebook": "calc/w2.ipynb"}
    state.lti.store.record_launch("bob", {**launch_body, "lineitem": item})
    assert state.lti.store.queue_score("bob", "calc/w2.ipynb", "quiz", 1, 2, completed=True) == 1
    server.stop()  # the service stops before it delivered anything
    state.executor.shutdown()

    state, server, _ = start_service(db, lms, tool_key)  # started again on the same database
    assert state.lti is not None
    try:
        state.lti.outbox(state.session()).start()  # what serve() does at start
        path = item.removeprefix(lms.url)
        async with asyncio.timeout(20):
            while not lms.scores.get(path):
                await asyncio.sleep(0.05)
        assert [s["userId"] for s in lms.scores[path]] == ["stu-bo"]
        assert state.lti.store.undelivered() == []
    finally:
        outbox: Outbox = state.lti.outbox(state.session())
        if outbox._task is not None:
            outbox._task.cancel()
        server.stop()
        if state._session is not None:
            await state._session.close()
        state.executor.shutdown()


async def test_mastery_goes_to_a_mapped_line_item_with_its_progress(service: Service) -> None:
    store = service.lti.store
    store.record_launch("carol", {"context": {"id": "calc-101"}, "lti_user": "stu-cy"})
    store.map_lineitem(LineItemMap("limits", "calc-101", "http://lms/lineitems/9", "mastery"))
    assert queue_mastery(store, "carol", {"limits": (0.5, 1), "other": (0.9, 9)}) == 1
    assert queue_mastery(store, "carol", {"limits": (0.9, 4)}) == 1
    # The next report repeats the objective unchanged: the gradebook has it already.
    assert queue_mastery(store, "carol", {"limits": (0.9, 4)}) == 0
    rows = store.undelivered()
    assert [(r.score_given, r.activity) for r in rows] == [
        (0.5, "InProgress"),
        (0.9, "Completed"),
    ]
    assert {r.lineitem for r in rows} == {"http://lms/lineitems/9"}


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"notebook": NOTEBOOK, "score": 5, "maximum": 4}, "above maximum"),
        ({"notebook": NOTEBOOK, "score": "3", "maximum": 4}, "score"),
        ({"notebook": NOTEBOOK, "score": 1, "maximum": 4, "comment": "hi"}, "comment"),
        ({"notebook": "calc/<script>", "score": 1, "maximum": 4}, "notebook"),
        ({"notebook": NOTEBOOK, "score": 1, "maximum": 1e9}, "maximum"),
        ({"score": 1, "maximum": 1}, "names its notebook"),
        ({"kind": "grade", "notebook": NOTEBOOK, "score": 1, "maximum": 1}, "kind"),
    ],
)
async def test_a_score_report_is_typed_and_bounded(
    service: Service, body: dict[str, Any], words: str
) -> None:
    status, text, _ = await service.call("POST", "v1/scores", "student-alice", json=body)
    assert status == 400 and words in text
    assert service.lti.store.all_scores() == []


async def test_scores_need_a_student_and_an_lms_student(service: Service) -> None:
    report = {"notebook": NOTEBOOK, "score": 1, "maximum": 1}
    status, _, _ = await service.call("POST", "v1/scores", json=report)
    assert status == 401
    padded = {**report, "notebook": "calc/" + "x" * 5000 + ".ipynb"}
    status, text, _ = await service.call("POST", "v1/scores", "student-dan", json=padded)
    assert status == 413 and "too long" in text
    # dan never launched from the LMS: nothing to send, nothing queued.
    status, text, _ = await service.call("POST", "v1/scores", "student-dan", json=report)
    assert (status, text) == (200, '{"queued": 0}')


async def test_the_instructor_maps_line_items_of_the_course_only(
    service: Service, lms: LTIPlatform
) -> None:
    store = service.lti.store
    lineitems = f"{lms.context_url('calc-101')}/lineitems"
    store.record_launch("ms-lee", {"context": {"id": "calc-101"}, "lineitems": lineitems})
    client = service.lti.client(service.state.session())
    form = {"context": "calc-101", "source": "limits", "kind": "mastery", "label": "Limits"}
    made = await map_lineitem(store, client, service.state.db, form)
    assert made.lineitem in lms.line_items  # created in the LMS's gradebook through AGS
    assert lms.line_items[made.lineitem]["label"] == "Limits"
    # A URL elsewhere would receive the LMS's token with the scores: refused.
    elsewhere = {**form, "lineitem": "https://attacker.example/lineitems/1"}
    with pytest.raises(MappingRefused, match="one of this course's"):
        await map_lineitem(store, client, service.state.db, elsewhere)
    with pytest.raises(MappingRefused, match="launched the tutor"):
        await map_lineitem(store, client, service.state.db, {**form, "context": "other"})
    assert [m.source for m in store.lineitems()] == ["limits"]


async def test_a_failing_score_is_on_the_page_without_the_token(
    service: Service, lms: LTIPlatform
) -> None:
    item = lms.add_line_item("calc-101", "Week 3")
    store = service.lti.store
    store.record_launch("erin", {"context": {"id": "calc-101"}, "lti_user": "stu-e"})
    store.map_lineitem(LineItemMap(NOTEBOOK, "calc-101", item, "quiz"))
    store.queue_score("erin", NOTEBOOK, "quiz", 2, 4, completed=True)
    lms.fail_scores.extend([503, 503])
    client = service.lti.client(service.state.session())
    await deliver_due(store, client, later(0))
    await deliver_due(store, client, later(backoff(1) + 1))
    (row,) = store.undelivered()
    assert row.attempts == 2
    html = section([], [], store.lineitems(), store.undelivered(), store.contexts(), "")
    assert "erin" in html and "HTTP 503 from the LMS" in html and "2 not delivered" not in html
    assert "1 not delivered yet" in html
    assert all(token not in html for token in lms.tokens)
    lms.fail_scores.clear()


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("course/calc/kb/week1.ipynb", "calc/kb/week1.ipynb"),
        ("/home/ada/course/calc/kb/week1.ipynb", "calc/kb/week1.ipynb"),
        ("homework/week1.ipynb", None),
        ("course/calc/notes.md", None),
    ],
)
def test_a_course_notebook_is_known_by_its_copy(path: str, source: str | None) -> None:
    assert course_notebook(path) == source


async def test_the_kernel_sends_a_course_notebooks_quiz_score(
    service: Service, lms: LTIPlatform
) -> None:
    item = lms.add_line_item("calc-101", "Week 1 quiz")
    await launch(service, "alice", "stu-ada", lineitem=item)
    env = {"DEEPTUTOR_HUB_SERVICE_URL": service.url + "v1", "DEEPTUTOR_HUB_TOKEN": "student-alice"}
    sent = send_quiz_score("/home/alice/course/calc/kb/week1.ipynb", 2, 3, environ=env)
    assert sent is not None
    await asyncio.to_thread(sent.join, 20)
    (row,) = service.lti.store.undelivered()
    assert (row.student, row.lti_user, row.lineitem) == ("alice", "stu-ada", item)
    assert (row.score_given, row.score_maximum) == (2, 3)
    assert send_quiz_score("homework/week1.ipynb", 2, 3, environ=env) is None


async def test_two_replicas_post_a_score_once(
    service: Service, lms: LTIPlatform, tmp_path: Path
) -> None:
    item = lms.add_line_item("calc-101", "Week 4")
    store = service.lti.store
    store.record_launch("fay", {"context": {"id": "calc-101"}, "lti_user": "stu-f"})
    store.map_lineitem(LineItemMap("calc/w4.ipynb", "calc-101", item, "quiz"))
    store.queue_score("fay", "calc/w4.ipynb", "quiz", 1, 1, completed=True)
    other = LTIStore(store.engine)  # a second replica on the same database
    client = service.lti.client(service.state.session())
    await asyncio.gather(deliver_due(store, client, later(0)), deliver_due(other, client, later(0)))
    assert len(lms.scores[item.removeprefix(lms.url)]) == 1


async def test_a_token_the_lms_revoked_is_asked_for_again(
    service: Service, lms: LTIPlatform
) -> None:
    item = lms.add_line_item("calc-101", "Week 5")
    store = service.lti.store
    store.record_launch("gus", {"context": {"id": "calc-101"}, "lti_user": "stu-g"})
    store.map_lineitem(LineItemMap("calc/w5.ipynb", "calc-101", item, "quiz"))
    client = service.lti.client(service.state.session())
    store.queue_score("gus", "calc/w5.ipynb", "quiz", 1, 2, completed=True)
    assert await deliver_due(store, client, later(0)) == (1, 0)
    lms.tokens.clear()  # the LMS forgets the token the tool holds
    store.queue_score("gus", "calc/w5.ipynb", "quiz", 2, 2, completed=True)
    assert await deliver_due(store, client, later(1)) == (0, 1)
    assert await deliver_due(store, client, later(backoff(1) + 2)) == (1, 0)
    assert [s["scoreGiven"] for s in lms.scores[item.removeprefix(lms.url)]] == [1, 2]


async def test_the_roster_follows_its_pages_on_its_own_lms_only(
    service: Service, lms: LTIPlatform
) -> None:
    store = service.lti.store
    memberships = f"{lms.context_url('calc-101')}/memberships"
    store.record_launch("hal", {"context": {"id": "calc-101"}, "lti_user": "stu-2",
                                "memberships": memberships})  # fmt: skip
    lms.members = [Member(f"stu-{i}", f"Student {i}") for i in range(5)]
    client = service.lti.client(service.state.session())
    rows, errors = await roster(store, client, {"hal": 3}, service.state.db)
    assert errors == [] and [r.name for r in rows] == [f"Student {i}" for i in range(5)]
    statuses = {r.lti_user: r.status for r in rows}
    assert statuses["stu-2"] == "3 tutor requests" and statuses["stu-4"] == NEVER_LAUNCHED
    # A next page said to be elsewhere would get the LMS's token: not followed.
    lms.link_base = "http://127.0.0.1:9"
    try:
        rows, _ = await roster(store, client, {}, service.state.db)
    finally:
        lms.link_base = ""
    assert [r.name for r in rows] == ["Student 0", "Student 1"]


async def test_an_lms_answer_past_the_bound_is_not_read(
    service: Service, lms: LTIPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.hub.lti import services

    monkeypatch.setattr(services, "MAX_BYTES", 100)  # a page of two members is more
    store = service.lti.store
    memberships = f"{lms.context_url('calc-101')}/memberships"
    store.record_launch("ida", {"context": {"id": "calc-101"}, "memberships": memberships})
    lms.members = [Member(f"stu-{i}", f"Student {i}") for i in range(3)]
    client = service.lti.client(service.state.session())
    rows, errors = await roster(store, client, {}, service.state.db)
    assert rows == [] and "larger than" in errors[0]
