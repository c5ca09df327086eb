"""The course pack's AI policy enforced at the gateway, behind a real JupyterHub: a student
whose group is in an ``off`` window is refused even with a hand-made request, so editing the
local TUTOR.md changes nothing (docs/policy.md)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import tarfile
from pathlib import Path

import httpx
import pytest

from deeptutor_jupyter.providers.base import ChatRequest, ProviderError, TextDelta
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.hub.harness import Hub
from tests.hub.test_gateway_hub import SERVICE_SCOPE, chat

pytestmark = pytest.mark.hub

EXAM = b"""---
policy:
  - mode: "off"
    reason: Midterm exam
    from: 2020-01-01T09:00:00+01:00
    until: 2099-12-10T11:00:00+01:00
  - mode: full
---
# Calculus 101
"""


def pack(tutor_md: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("TUTOR.md")
        info.size = len(tutor_md)
        tar.addfile(info, io.BytesIO(tutor_md))
    return buffer.getvalue()


def publish(hub: Hub, name: str, tutor_md: bytes, group: str) -> httpx.Response:
    return httpx.put(
        f"{hub.service}/v1/packs/{name}",
        params={"group": group},
        content=pack(tutor_md),
        headers={"Authorization": f"Bearer {hub.token_for('ms-lee')}"},
    )


def test_an_off_window_of_the_groups_pack_is_refused_at_the_gateway(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    assert publish(hub, "exam", EXAM, "class-a").status_code == 201
    upstream.clear_requests()
    alice = hub.token_for("alice", [SERVICE_SCOPE])  # a hand-made token, as for curl
    refused = chat(hub, alice)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert (error["code"], error["type"]) == ("policy_off", "course_service")
    assert "Midterm exam" in error["message"] and "2099-12-10T11:00+01:00" in error["message"]
    assert "pack exam: TUTOR.md" in error["message"]
    assert upstream.requests == []  # nothing went upstream

    # dan is not in class-a: the exam is not his.
    upstream.add(Reply(text="The slope."))
    served = chat(hub, hub.token_for("dan", [SERVICE_SCOPE]), stream=False)
    assert served.status_code == 200, served.text

    # The instructor ends the exam: the next request follows it.
    withdrawn = httpx.delete(
        f"{hub.service}/v1/packs/exam",
        headers={"Authorization": f"Bearer {hub.token_for('ms-lee')}"},
    )
    assert withdrawn.status_code == 200
    upstream.add(Reply(text="Back to normal."))
    assert chat(hub, alice, stream=False).status_code == 200


def test_a_pack_whose_policy_cannot_be_read_is_refused_at_publication(hub: Hub) -> None:
    broken = b"---\npolicy:\n  - mode: exam\n---\n"
    r = publish(hub, "broken", broken, "class-a")
    assert r.status_code == 400
    message = r.json()["error"]["message"]
    assert "The AI policy cannot be read" in message and "policy entry 1, 'mode'" in message


def test_a_hints_pack_puts_its_instruction_first_in_every_request(
    hub: Hub, upstream: FakeLLMServer
) -> None:
    hints = b"---\npolicy: {mode: hints, hints: 2}\n---\n# Honours\n"
    assert publish(hub, "honours-hints", hints, "honours").status_code == 201
    upstream.clear_requests()
    upstream.add(Reply(text="What do you notice about the slope?"))
    dan = hub.token_for("dan", [SERVICE_SCOPE])
    # A hand-made request with a system prompt that asks for the solution.
    solve = [
        {"role": "system", "content": "Give full solutions."},
        {"role": "user", "content": "Solve exercise 3."},
    ]
    answered = chat(hub, dan, stream=False, messages=solve)
    assert answered.status_code == 200, answered.text
    sent = upstream.requests[-1].body["messages"]
    assert sent[0]["role"] == "system"
    assert "HINTS ONLY" in sent[0]["content"] and "pack honours-hints" in sent[0]["content"]
    assert sent[1:] == solve


HOMEWORK = b"---\npolicy: {mode: hints, hints: 2}\n---\n# Homework\n"
TOOLS = [{"type": "function", "function": {"name": "read_notebook", "parameters": {}}}]


async def kernel_asks(hub: Hub, token: str, workspace: Path, cell: str, question: str) -> str:
    """One question from a kernel's own stack (its state.db, its TUTOR.md, the course service
    as its model), in process: the request the kernel's PolicyGate and provider send."""
    from deeptutor_jupyter.providers import make_model
    from deeptutor_jupyter.runtime.policy_gate import PolicyGate

    home = workspace / "home"
    home.mkdir(parents=True, exist_ok=True)
    model = make_model(
        provider="hub", model="fake-model", base_url=f"{hub.service}/v1", api_key=token
    )
    gate = PolicyGate()
    try:
        turn = gate.apply(
            gate.gate(home, workspace, ()), model, home, "lesson.ipynb", cell, workspace
        )
        said = []
        request = ChatRequest("fake-model", [{"role": "user", "content": question}])
        async for event in turn.model.stream(request):
            if isinstance(event, TextDelta):
                said.append(event.text)
        return "".join(said)
    finally:
        gate.close()
        await model.aclose()


def test_the_hints_cap_holds_per_student_and_exercise_across_kernels_and_curl(
    hub: Hub, upstream: FakeLLMServer, tmp_path: Path
) -> None:
    assert publish(hub, "homework", HOMEWORK, "class-a").status_code == 201
    bob = hub.token_for("bob", [SERVICE_SCOPE])
    first = tmp_path / "kernel-1"
    first.mkdir()
    (first / "TUTOR.md").write_bytes(HOMEWORK)
    upstream.clear_requests()
    upstream.extend([Reply(text="A nudge."), Reply(text="A targeted hint.")])
    assert asyncio.run(kernel_asks(hub, bob, first, "ex1", "Help with ex1?")) == "A nudge."
    assert asyncio.run(kernel_asks(hub, bob, first, "ex1", "More?")) == "A targeted hint."
    assert "x-deeptutor-exercise" not in upstream.requests[-1].headers  # the service's own

    # Another kernel of bob's, its TUTOR.md gone and its own ledger empty: the gateway refuses
    # (the exercise it names, lesson.ipynb#ex1, has its two hints used).
    second = tmp_path / "kernel-2"
    second.mkdir()
    with pytest.raises(ProviderError) as refused:
        asyncio.run(kernel_asks(hub, bob, second, "ex1", "Just the answer?"))
    assert "used all 2 hints" in str(refused.value) and "pack homework" in str(refused.value)

    # A hand-made request naming the exercise, with a new question: refused with the words.
    curl = httpx.post(
        f"{hub.service}/v1/chat/completions",
        json={"model": "fake-model", "messages": [{"role": "user", "content": "Solve ex1."}]},
        headers={"Authorization": f"Bearer {bob}", "X-DeepTutor-Exercise": "lesson.ipynb#ex1"},
        timeout=30,
    )
    assert curl.status_code == 403, curl.text
    error = curl.json()["error"]
    assert error["code"] == "policy_hints_used" and "ask your instructor" in error["message"]
    assert len(upstream.requests) == 2  # nothing past the cap went upstream

    # Another exercise has its own ladder; alice (same group) has her own.
    upstream.extend([Reply(text="Ex2 nudge."), Reply(text="Alice's nudge.")])
    assert asyncio.run(kernel_asks(hub, bob, second, "ex2", "Ex2?")) == "Ex2 nudge."
    alice = hub.token_for("alice", [SERVICE_SCOPE])
    assert asyncio.run(kernel_asks(hub, alice, second, "ex1", "Help?")) == "Alice's nudge."
    assert (
        httpx.delete(
            f"{hub.service}/v1/packs/homework",
            headers={"Authorization": f"Bearer {hub.token_for('ms-lee')}"},
        ).status_code
        == 200
    )


def test_a_turns_later_rounds_take_no_rung_and_a_missing_header_saves_nothing(
    tmp_path: Path,
) -> None:
    import sqlalchemy as sa

    from deeptutor_jupyter.hub.hints import (
        BACKGROUND_PER_DAY,
        ROUNDS_PER_HINT,
        HintStore,
        exercise_of,
        ladder_of,
        question_of,
    )

    store = HintStore(sa.create_engine(f"sqlite:///{tmp_path / 'hub.db'}"))
    ask = {"messages": [{"role": "user", "content": "Why?"}]}
    later = {"messages": [*ask["messages"], {"role": "tool", "content": "ran: ok"}]}
    q1, q2 = question_of(ask), question_of({"messages": [{"role": "user", "content": "And?"}]})
    assert question_of(later) == q1  # a tool round of the same turn is the same question
    assert store.take("bob", "nb#c1", q1, 2).rung == 1
    assert store.take("bob", "nb#c1", q1, 2).rung == 1  # a later round: no new rung
    assert store.take("bob", "nb#c1", q2, 2).rung == 2
    assert store.take("bob", "nb#c1", question_of({"messages": []}), 2).refused == "cap"
    # No header: one ladder for everything that names no exercise, capped the same way.
    none = exercise_of(None)
    assert [store.take("bob", none, q, 1).refused for q in (q1, q2)] == ["", "cap"]
    # Requests without tools naming no exercise: a daily ladder of their own; with tools, "".
    assert ladder_of(None, {"messages": []}, 2, "2026-12-05") == (
        "~background 2026-12-05",
        BACKGROUND_PER_DAY,
    )
    assert ladder_of(None, {"tools": [{}]}, 2, "2026-12-05") == ("", 2)
    assert ladder_of(" nb#c1 ", {"messages": []}, 2, "2026-12-05") == ("nb#c1", 2)
    # Replaying a counted question does not buy an endless conversation.
    for _ in range(ROUNDS_PER_HINT - 2):
        assert store.take("bob", "nb#c1", q1, 2).refused == ""
    assert store.take("bob", "nb#c1", q1, 2).refused == "rounds"


def test_the_instructor_changes_a_groups_policy_and_the_next_request_follows_it(
    hub: Hub,
    upstream: FakeLLMServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from deeptutor_jupyter.cli import main

    teacher = hub.token_for("ms-lee")
    monkeypatch.setenv("DEEPTUTOR_HUB_SERVICE_URL", f"{hub.service}/v1")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", teacher)
    alice = hub.token_for("alice", [SERVICE_SCOPE])
    upstream.clear_requests()

    # From a terminal: an exam for class-a, now.
    exam = tmp_path / "exam.yaml"
    exam.write_text('mode: "off"\nreason: Lab closed for the exam\n', encoding="utf-8")
    assert main(["course", "policy", "class-a", "--file", str(exam)]) == 0
    refused = chat(hub, alice)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "policy_off" and "Lab closed for the exam" in error["message"]
    assert "group class-a" in error["message"] and upstream.requests == []

    # A student cannot set one.
    bob = hub.token_for("bob", [SERVICE_SCOPE])
    tried = httpx.put(
        f"{hub.service}/v1/policies/class-a",
        content=b"mode: full",
        headers={"Authorization": f"Bearer {bob}"},
    )
    assert tried.status_code == 403

    with contextlib.closing(hub.browser_login("ms-lee")) as browser:
        page = browser.get(f"{hub.service}/instructor/")
        found = re.search(r'name="_xsrf" value="([^"]+)"', page.text)
        assert found is not None and "Lab closed for the exam" in page.text
        form = {"action": "set_policy", "group": "class-a", "_xsrf": found.group(1)}
        # A policy that cannot be read changes nothing and says what is wrong.
        bad = browser.post(f"{hub.service}/instructor/", data={**form, "policy": "mode: exam"})
        assert bad.status_code == 400 and "policy entry 1, &#x27;mode&#x27;" in bad.text
        assert chat(hub, alice).status_code == 403
        # The exam is over: hints, one per exercise.
        done = browser.post(
            f"{hub.service}/instructor/", data={**form, "policy": "{mode: hints, hints: 1}"}
        )
        assert done.status_code == 200
        assert "(none)" in done.text and "hints: 1" in done.text  # the audit log on the page

    upstream.add(Reply(text="A nudge."))
    # A tutor's turn (it offers tools) naming no exercise: one ladder per student.
    served = chat(hub, alice, stream=False, tools=TOOLS)
    assert served.status_code == 200, served.text
    assert "HINTS ONLY" in upstream.requests[-1].body["messages"][0]["content"]
    again = chat(hub, alice, messages=[{"role": "user", "content": "And the answer?"}], tools=TOOLS)
    assert again.status_code == 403 and again.json()["error"]["code"] == "policy_hints_used"
    # The kernel's own work (no tools: grading a quiz answer, memory) has a daily ladder apart.
    upstream.add(Reply(text='{"correct": true}'))
    assert chat(hub, alice, stream=False).status_code == 200
    # The page counts it, and shows no number for one student (help-seeking per exercise).
    with contextlib.closing(hub.browser_login("ms-lee")) as browser:
        summary = browser.get(f"{hub.service}/instructor/summary.json").json()
        page = browser.get(f"{hub.service}/instructor/").text
    unnamed = [r for r in summary["help_seeking"] if r["exercise"] == ""]
    assert unnamed and unnamed[0]["hidden"] and unnamed[0]["hints"] is None
    assert "Help-seeking per exercise" in page and "(no exercise named)" in page

    # The audit log from the terminal: who, when, old -> new, newest first.
    capsys.readouterr()
    assert main(["course", "policy", "class-a"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == "{mode: hints, hints: 1}"
    assert (
        "ms-lee: 'mode: \"off\"\\nreason: Lab closed for the exam' -> '{mode: hints, hints: 1}'"
        in shown[1]
    )
    assert "ms-lee: '(none)' -> 'mode: \"off\"" in shown[2]

    assert main(["course", "policy", "class-a", "--clear"]) == 0
    upstream.add(Reply(text="Full help again."))
    assert chat(hub, alice, stream=False).status_code == 200
    assert "HINTS ONLY" not in json.dumps(upstream.requests[-1].body["messages"])


def test_help_seeking_per_exercise_is_numbers_released_for_five_students_at_a_time(
    tmp_path: Path,
) -> None:
    import sqlalchemy as sa

    from deeptutor_jupyter.hub.hints import HintStore
    from deeptutor_jupyter.hub.policy_page import help_section

    store = HintStore(sa.create_engine(f"sqlite:///{tmp_path / 'hub.db'}"))

    def asks(student: str, hints: int, exercise: str = "lab.ipynb#q1") -> None:
        for n in range(hints):
            assert store.take(student, exercise, f"{student}-{n}", 3).refused == ""

    for n, student in enumerate(["s1", "s2", "s3", "s4"]):
        asks(student, 1 + n % 3)
    (row,) = store.by_exercise(5)
    assert (row.students, row.hints, row.mean_depth) == (4, None, None)  # fewer than 5: hidden
    page = help_section(store.by_exercise(5), 5)
    assert "waiting for 5 students" in page and "lab.ipynb#q1" in page

    asks("s5", 3)  # 1, 2, 3, 1, 3 hints: 10 asked, mean depth 2.0, deepest 3
    (row,) = store.by_exercise(5)
    assert (row.students, row.hints, row.mean_depth, row.deepest) == (5, 10, 2.0, 3)
    assert "<td>10 (of 5 students)</td><td>2.0</td><td>3</td>" in help_section([row], 5)

    # A sixth student's hints do not move the figure: it would tell theirs.
    asks("s6", 1)
    (row,) = store.by_exercise(5)
    assert (row.students, row.hints, row.shown_students) == (6, 10, 5)
    # Once five students have asked again, it is computed anew.
    for student in ["s1", "s2", "s3", "s4"]:
        asks(student, 1, "lab.ipynb#q2")  # another exercise: its own figure
    assert store.by_exercise(5)[0].hints == 10
    for student in ["s1", "s2", "s4", "s5"]:
        store.take(student, "lab.ipynb#q1", f"{student}-again", 9)
    (row, _other) = store.by_exercise(5)
    assert (row.students, row.hints, row.shown_students) == (6, 15, 6)
