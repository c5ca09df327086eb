"""Budgets, privacy and the instructor page, through a real JupyterHub (hub OAuth included)."""

from __future__ import annotations

import contextlib
import csv
import io

import httpx
import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.hub.harness import Hub
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


def test_mastery_is_numbers_only_and_small_groups_are_hidden(hub: Hub) -> None:
    students = ("alice", "bob", "carol", "dan", "erin")
    for i, name in enumerate(students):
        token = hub.token_for(name, [SERVICE_SCOPE])
        values = {"derivatives": 0.2 * i}
        if name in ("alice", "bob"):
            values["integrals"] = 0.9
        r = httpx.post(f"{hub.service}/v1/mastery", json=values, headers=auth(token))
        assert r.status_code == 200, r.text
    text_report = httpx.post(
        f"{hub.service}/v1/mastery",
        json={"my notes on what I got wrong": "I confused dx and dy"},
        headers=auth(hub.token_for("alice", [SERVICE_SCOPE])),
    )
    assert text_report.status_code == 400

    summary = httpx.get(
        f"{hub.service}/instructor/summary.json", headers=auth(hub.token_for("ms-lee"))
    ).json()
    by_objective = {m["objective"]: m for m in summary["mastery"]}
    assert by_objective["derivatives"]["students"] == 5
    assert by_objective["derivatives"]["mean"] == pytest.approx(0.4)
    assert by_objective["integrals"] == {
        "objective": "integrals",
        "students": 2,
        "mean": None,
        "mastered": None,
        "hidden": True,
    }
    assert "I confused" not in str(summary)
