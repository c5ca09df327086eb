"""Budgets, privacy and the instructor page, through a real JupyterHub (hub OAuth included)."""

from __future__ import annotations

import contextlib
import csv
import html
import io
import os
import re
import signal
import sqlite3
import tarfile
import time

import httpx
import pytest

from deeptutor_jupyter.hub.mastery import REPORTS_PER_MINUTE
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.hub.harness import Hub, service_pid
from tests.hub.test_gateway_hub import SERVICE_SCOPE, chat, sse_text

pytestmark = pytest.mark.hub

BUDGET_WORDS = (
    "You have used today's tutor budget; it resets at 00:00 UTC. Ask your instructor for more."
)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"token {token}"}


def test_a_spent_budget_is_refused_in_plain_words_until_the_instructor_raises_it(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    alice = hub.token_for("alice", [SERVICE_SCOPE])
    bob = hub.token_for("bob", [SERVICE_SCOPE])
    upstream.add(
        Reply(text="Long answer.", usage={"prompt_tokens": 14_000, "completion_tokens": 7_000})
    )
    assert chat(hub, alice).status_code == 200  # admitted: nothing used yet today
    upstream.clear_requests()
    refused = chat(hub, alice)
    assert refused.status_code == 429
    assert refused.json()["error"]["message"] == BUDGET_WORDS
    assert refused.json()["error"]["code"] == "budget_exhausted"
    assert upstream.requests == []  # the refusal costs the course nothing

    # Bob's budget is his own.
    upstream.add(Reply(text="Yes."))
    assert sse_text(chat(hub, bob)) == "Yes."

    # The instructor raises Alice's budget on the page (token auth here; OAuth below).
    teacher = hub.token_for("ms-lee")
    r = httpx.post(
        f"{hub.service}/instructor/",
        data={"student": "alice", "daily_tokens": "50000", "requests_per_minute": ""},
        headers=auth(teacher),
        follow_redirects=False,
    )
    assert r.status_code == 302, r.text
    upstream.add(Reply(text="Again."))
    assert sse_text(chat(hub, alice)) == "Again."
    mine = httpx.get(f"{hub.service}/v1/usage", headers=auth(alice)).json()
    assert mine["limits"] == {"daily_tokens": 50000, "requests_per_minute": None}


def test_a_student_cannot_read_another_students_usage(hub: Hub, upstream: FakeLLMServer) -> None:
    alice = hub.token_for("alice", [SERVICE_SCOPE])
    bob = hub.token_for("bob", [SERVICE_SCOPE])
    upstream.add(Reply(text="ok", usage={"prompt_tokens": 3, "completion_tokens": 2}))
    assert chat(hub, alice, max_tokens=5).status_code == 200

    asked = httpx.get(f"{hub.service}/v1/usage", params={"student": "alice"}, headers=auth(bob))
    assert asked.status_code == 403
    own = httpx.get(f"{hub.service}/v1/usage", headers=auth(bob)).json()
    assert own["student"] == "bob"
    assert all(row["student"] == "bob" for row in own["usage"])
    for path in ("instructor/", "instructor/summary.json", "instructor/usage.csv"):
        r = httpx.get(f"{hub.service}/{path}", headers=auth(hub.token_for("bob")))
        assert r.status_code == 403, path
        assert "alice" not in r.text

    teacher = httpx.get(
        f"{hub.service}/instructor/summary.json", headers=auth(hub.token_for("ms-lee"))
    )
    assert teacher.status_code == 200
    assert teacher.json()["usage"]["alice"]["requests"] >= 1


def test_the_instructor_page_uses_hub_oauth_and_exports_csv(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    carol = hub.token_for("carol", [SERVICE_SCOPE])
    upstream.add(Reply(text="ok", usage={"prompt_tokens": 11, "completion_tokens": 7}))
    assert chat(hub, carol, max_tokens=5).status_code == 200

    with contextlib.closing(hub.browser_login("ms-lee")) as browser:
        page = browser.get(f"{hub.service}/instructor/")
        assert page.status_code == 200
        assert str(page.url).startswith(f"{hub.service}/instructor/")
        assert "Tutor usage" in page.text and "carol" in page.text
        exported = browser.get(f"{hub.service}/instructor/usage.csv")
        rows = list(csv.DictReader(io.StringIO(exported.text)))
        carol_rows = [r for r in rows if r["student"] == "carol"]
        assert carol_rows[0]["prompt_tokens"] == "11"
        assert carol_rows[0]["completion_tokens"] == "7"

    with contextlib.closing(hub.browser_login("bob")) as browser:
        assert browser.get(f"{hub.service}/instructor/").status_code == 403


def publish_objectives(hub: Hub, *titles: str) -> None:
    """A pack whose TUTOR.md lists ``titles``: the course's objectives (hub/mastery.py)."""
    text = "# Course\n\n## Objectives\n\n" + "".join(f"- {t}\n" for t in titles)
    data = text.encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("TUTOR.md")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    r = httpx.put(
        f"{hub.service}/v1/packs/objectives",
        content=buffer.getvalue(),
        headers=auth(hub.token_for("ms-lee")),
    )
    assert r.status_code in (200, 201), r.text


def mastery_summary(hub: Hub) -> dict[str, dict[str, object]]:
    summary = httpx.get(
        f"{hub.service}/instructor/summary.json", headers=auth(hub.token_for("ms-lee"))
    ).json()
    assert "I confused" not in str(summary)
    return {m["objective"]: m for m in summary["mastery"]}


def test_mastery_is_numbers_only_and_small_groups_are_hidden(hub: Hub) -> None:
    publish_objectives(hub, "Derivatives", "Integrals")
    students = ("alice", "bob", "carol", "dan", "erin")
    for i, name in enumerate(students):
        token = hub.token_for(name, [SERVICE_SCOPE])
        values = {"derivatives": 0.2 * i}
        if name in ("alice", "bob"):
            values["integrals"] = 0.9
        r = httpx.post(f"{hub.service}/v1/mastery", json=values, headers=auth(token))
        assert r.status_code == 200, r.text
    alice = auth(hub.token_for("alice", [SERVICE_SCOPE]))
    for words, bad in (
        ("not one of the course's objectives", {"my notes on what I got wrong": 0.5}),
        ("not one of the course's objectives", {"derivatives-2": 0.5}),
        ("between 0 and 1", {"derivatives": "I confused dx and dy"}),
    ):
        refused = httpx.post(f"{hub.service}/v1/mastery", json=bad, headers=alice)
        assert refused.status_code == 400 and words in refused.json()["error"]["message"]

    by_objective = mastery_summary(hub)
    assert by_objective["derivatives"]["students"] == 5
    assert by_objective["derivatives"]["mean"] == pytest.approx(0.4)
    assert by_objective["integrals"] == {
        "objective": "integrals",
        "students": 2,
        "mean": None,
        "mastered": None,
        "shown_students": None,
        "hidden": True,
    }
    # A sixth student reports: the mean of six minus the mean of five would be their value,
    # so the figure stays as it was (hub/mastery.py) while the count of reports moves.
    sixth = hub.token_for("ms-lee", [SERVICE_SCOPE])
    r = httpx.post(f"{hub.service}/v1/mastery", json={"derivatives": 1.0}, headers=auth(sixth))
    assert r.status_code == 200
    after = mastery_summary(hub)["derivatives"]
    assert after["students"] == 6 and after["shown_students"] == 5
    assert after["mean"] == pytest.approx(0.4)


def test_mastery_reports_are_rate_limited_and_the_instructor_can_forget_them(hub: Hub) -> None:
    publish_objectives(hub, "Derivatives", "Integrals", "Series")
    carol = auth(hub.token_for("carol", [SERVICE_SCOPE]))
    codes = [
        httpx.post(f"{hub.service}/v1/mastery", json={"series": 0.5}, headers=carol).status_code
        for _ in range(REPORTS_PER_MINUTE + 1)
    ]
    # carol may have reported once in the test before; the limit is per minute.
    assert codes[-1] == 429 and set(codes[:-1]) <= {200, 429} and codes.count(200) >= 1
    assert mastery_summary(hub)["series"]["students"] == 1

    with contextlib.closing(hub.browser_login("ms-lee")) as browser:
        page = browser.get(f"{hub.service}/instructor/")
        assert "series" in page.text and "Forget" in page.text
        found = re.search(r'name="_xsrf" value="([^"]+)"', page.text)
        assert found is not None
        xsrf = html.unescape(found.group(1))
        form = {"action": "forget_objective", "objective": "series"}
        refused = browser.post(f"{hub.service}/instructor/", data=form)
        assert refused.status_code == 403  # no XSRF token: the page's own forms carry one
        assert "series" in mastery_summary(hub)
        done = browser.post(f"{hub.service}/instructor/", data={**form, "_xsrf": xsrf})
        assert done.status_code == 200
        assert "series" not in mastery_summary(hub)
        form = {"action": "forget_student", "student": "alice", "_xsrf": xsrf}
        assert browser.post(f"{hub.service}/instructor/", data=form).status_code == 200
    assert mastery_summary(hub)["integrals"]["students"] == 1  # bob's row only


def budget_row(hub: Hub, student: str) -> tuple[int, int]:
    """(used, held) of the student's day, read from the service's SQLite file."""
    path = hub.db_url.removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
        row = db.execute(
            "SELECT used, held FROM deeptutor_budget_day WHERE student = ? ORDER BY day DESC",
            (student,),
        ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def test_a_crashed_service_gives_the_holds_back_when_it_starts_again(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    erin = hub.token_for("erin", [SERVICE_SCOPE])
    before = budget_row(hub, "erin")
    upstream.add(Reply(chunks=[f"w{i} " for i in range(2000)], chunk_delay=0.05))
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "long"}]}
    pid = service_pid(hub)
    assert pid is not None
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST",
            f"{hub.service}/v1/chat/completions",
            json={**body, "stream": True, "max_tokens": 3000},
            headers=auth(erin),
        ) as r,
    ):
        # The iterator is kept: a generator dropped after ``break`` is closed at once, which
        # closes the connection, and the service then settles the request as one the student
        # left (this test read the row after that now and then, under load).
        seen, chunks = "", r.iter_text()
        for chunk in chunks:
            seen += chunk
            if "w3" in seen:
                break
        assert "w3" in seen, (r.status_code, seen[:2000])  # mid-answer, not after it
        used, held = budget_row(hub, "erin")
        # (A hold already settled mid-answer says the relay ended early: the log says why.)
        assert held > 3000 and used == before[0], (used, held, before, hub.log_text()[-3000:])
        os.kill(pid, signal.SIGKILL)  # mid-answer: no settlement, no release
    # The hub starts its managed service again (it polls every 30 s); the new process, on the
    # same port, gives back what the dead one held and bills the prompt it had sent.
    deadline = time.monotonic() + 120
    while (service_pid(hub) in (None, pid)) or budget_row(hub, "erin")[1] != 0:
        assert time.monotonic() < deadline, hub.log_text()
        time.sleep(0.5)
    used, held = budget_row(hub, "erin")
    assert held == 0 and used > before[0]
    # The restarted process answers through the hub's proxy once the proxy has let go of its
    # connections to the dead one: until then it serves the hub's 503 page (the tests after
    # this one got that page when it went on at once).
    deadline = time.monotonic() + 60
    while (
        r := httpx.get(f"{hub.service}/v1/usage", headers=auth(erin), timeout=30)
    ).status_code != 200:
        assert time.monotonic() < deadline, (r.status_code, r.text[:500])
        time.sleep(0.5)
    assert any(row["model"] == "interrupted" for row in r.json()["usage"])


def test_the_instructor_sees_today_with_refusals_and_can_give_a_day_back(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    dan = hub.token_for("dan", [SERVICE_SCOPE])  # honours: 50,000 a day
    upstream.add(
        Reply(text="Long answer.", usage={"prompt_tokens": 30_000, "completion_tokens": 19_990})
    )
    assert chat(hub, dan).status_code == 200
    assert chat(hub, dan).status_code == 429
    teacher = auth(hub.token_for("ms-lee"))
    summary = httpx.get(f"{hub.service}/instructor/summary.json", headers=teacher).json()
    assert summary["today"]["dan"] == {"student": "dan", "used": 49_990, "held": 0, "refused": 1}
    page = httpx.get(f"{hub.service}/instructor/", headers=teacher).text
    assert "Refused requests" in page and "<td>dan</td><td>49990</td><td>0</td><td>1</td>" in page

    r = httpx.post(
        f"{hub.service}/instructor/",
        data={"action": "reset_day", "student": "dan"},
        headers=teacher,
        follow_redirects=False,
    )
    assert r.status_code == 302
    summary = httpx.get(f"{hub.service}/instructor/summary.json", headers=teacher).json()
    assert summary["today"]["dan"]["used"] == 0
    upstream.add(Reply(text="Again."))
    assert sse_text(chat(hub, dan)) == "Again."
    # The usage history keeps what was used; only the day's budget came back.
    assert summary["usage"]["dan"]["prompt_tokens"] >= 30_000


def test_the_hubs_services_link_leads_to_the_instructor_page(hub: Hub) -> None:
    for url in (f"{hub.service}/", hub.service):
        r = httpx.get(url, follow_redirects=False)
        assert r.status_code == 302, url
        assert r.headers["location"].endswith("/services/deeptutor/instructor/")
