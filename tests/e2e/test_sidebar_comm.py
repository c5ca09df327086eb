"""The sidebar's comm (kernel/comm.py) in a real kernel, played from the panel's side: a question
asked over the comm streams coalesced events, a finished turn replays ``after_seq``, an ask_user
question is answered over the comm, and bad input is refused in words."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.kernel.comm_messages import kernel_message
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.e2e.kernel_driver import KernelDriver, kernel_env

pytestmark = pytest.mark.e2e


class Panel:
    """The panel's end of the ``deeptutor`` comm, over the driver's channels."""

    def __init__(self, kernel: KernelDriver) -> None:
        self.kernel = kernel
        self.comm_id = uuid.uuid4().hex
        msg = kernel.kc.session.msg(
            "comm_open", {"comm_id": self.comm_id, "target_name": "deeptutor", "data": {}}
        )
        kernel.kc.shell_channel.send(msg)

    def send(self, data: dict[str, Any]) -> None:
        self.kernel.send_comm(self.comm_id, data)

    def messages(self) -> list[dict[str, Any]]:
        found = [
            m["content"]["data"]
            for m in self.kernel.iopub
            if m["header"]["msg_type"] == "comm_msg" and m["content"]["comm_id"] == self.comm_id
        ]
        for message in found:
            kernel_message(message)  # every message fits the contract the panel's types come from
        return found

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        found = [m["event"] for m in self.messages() if m["type"] == "event"]
        return [e for e in found if kind is None or e["type"] == kind]

    def errors(self) -> list[dict[str, Any]]:
        return [m for m in self.messages() if m["type"] == "error"]

    def wait(self, predicate: Any, timeout: float = 30.0) -> Any:
        return self.kernel.wait_for(predicate, timeout)


def test_a_question_asked_over_the_comm_streams_coalesced_events(
    kernel: KernelDriver, fake_llm: FakeLLMServer
) -> None:
    words = [f"word{i} " for i in range(400)]
    fake_llm.extend([Reply(chunks=words)])
    panel = Panel(kernel)
    panel.wait(lambda: any(m["type"] == "turns" for m in panel.messages()))

    panel.send({"action": "ask", "question": "Explain rank.", "conversation": None})
    done = panel.wait(lambda: panel.events("done"))[0]

    content = panel.events("content")
    assert "".join(e["text"] for e in content) == "".join(words)
    assert done["status"] == "done"
    # 400 deltas were emitted; the panel got them in far fewer messages.
    assert len(content) < len(words) / 4
    seqs = [e["seq"] for e in panel.events()]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert panel.events("turn_started")[0]["question"] == "Explain rank."
    asked = [m for m in fake_llm.requests[0].body["messages"] if m["role"] == "user"]
    assert "Explain rank." in json.dumps(asked)


def test_a_reconnecting_panel_gets_the_turns_and_replays_after_seq(
    kernel: KernelDriver, fake_llm: FakeLLMServer
) -> None:
    fake_llm.extend([Reply(chunks=["The rank ", "counts ", "pivots."])])
    first = Panel(kernel)
    first.send({"action": "ask", "question": "What is rank?", "conversation": None})
    first.wait(lambda: first.events("done"))
    turn_id = first.events("done")[0]["turn_id"]
    start_seq = first.events("turn_started")[0]["seq"]

    again = Panel(kernel)  # a page reload opens a new comm
    turns = again.wait(lambda: [m for m in again.messages() if m["type"] == "turns"])[0]
    assert [(t["turn_id"], t["question"], t["status"]) for t in turns["turns"]] == [
        (turn_id, "What is rank?", "done")
    ]
    again.send({"action": "subscribe", "turn_id": turn_id, "after_seq": start_seq})
    again.wait(lambda: again.events("done"))

    assert "".join(e["text"] for e in again.events("content")) == "The rank counts pivots."
    assert again.events("turn_started") == []  # it was at or before after_seq


def test_an_ask_user_question_is_answered_over_the_comm(
    kernel: KernelDriver, fake_llm: FakeLLMServer
) -> None:
    args = {
        "title": "Which way?",
        "mode": "single",
        "options": [{"id": "safe", "label": "Analyse first"}, {"id": "fast", "label": "Go"}],
    }
    fake_llm.extend(
        [
            Reply(text="One question.", tool_calls=[ToolCallSpec("ask_user", args, id="c1")]),
            Reply(text="We analyse first."),
        ]
    )
    panel = Panel(kernel)
    panel.send({"action": "ask", "question": "Help me.", "conversation": None})
    question = panel.wait(lambda: panel.events("user_input_required"))[0]
    assert (question["title"], question["mode"]) == ("Which way?", "single")

    # From another session first: refused, and the question stays open.
    answer = {"action": "answer", "request_id": question["id"], "selections": ["safe"]}
    panel.send({**answer, "session_id": "nb-someone-else", "custom_input": "", "cancelled": False})
    refusal = panel.wait(lambda: [m for m in panel.messages() if m["type"] == "error"])[0]
    assert refusal["code"] == "foreign_session"

    panel.send({**answer, "session_id": question["session_id"], "custom_input": ""})
    panel.wait(lambda: panel.events("done"))

    answered = next(m for m in panel.messages() if m["type"] == "answered")
    assert answered["result"]["selections"] == ["safe"]
    assert panel.events("user_input_resolved")[0]["selections"] == ["safe"]
    assert "We analyse first." in "".join(e["text"] for e in panel.events("content"))
    tool_result = [
        m for r in fake_llm.requests for m in r.body["messages"] if m.get("tool_call_id") == "c1"
    ]
    assert json.loads(tool_result[0]["content"])["selections"] == ["safe"]


def test_stop_from_the_panel_cancels_the_running_turn(
    kernel: KernelDriver, fake_llm: FakeLLMServer
) -> None:
    fake_llm.extend([Reply(chunks=[f"w{i} " for i in range(200)], chunk_delay=0.05)])
    panel = Panel(kernel)
    panel.send({"action": "ask", "question": "A long one.", "conversation": None})
    started = panel.wait(lambda: panel.events("content"))[0]

    panel.send({"action": "stop", "turn_id": started["turn_id"]})
    done = panel.wait(lambda: panel.events("done"))[0]

    assert done["status"] == "cancelled"
    assert "Stopped from the Tutor panel." in [e["text"] for e in panel.events("notice")]


def test_a_new_conversation_and_switching_back(
    kernel: KernelDriver, fake_llm: FakeLLMServer
) -> None:
    fake_llm.extend([Reply(text="First answer."), Reply(text="Second answer.")])
    panel = Panel(kernel)

    def last_turns() -> dict[str, Any]:
        return [m for m in panel.messages() if m["type"] == "turns"][-1]

    panel.send({"action": "ask", "question": "First question?", "conversation": None})
    panel.wait(lambda: len(panel.events("done")) == 1)
    first = last_turns()["session_id"]

    panel.send({"action": "new"})
    panel.wait(lambda: last_turns()["session_id"] != first)
    assert last_turns()["turns"] == []
    panel.send({"action": "ask", "question": "Second question?", "conversation": None})
    panel.wait(lambda: len(panel.events("done")) == 2)
    # The turn list follows the done event: wait for the one that counts the finished turn.
    panel.wait(lambda: len(last_turns()["conversations"]) == 2)
    second = last_turns()
    # The new conversation has no history from the first.
    sent = json.dumps(fake_llm.requests[1].body["messages"])
    assert "First question?" not in sent and "Second question?" in sent
    assert [c["title"] for c in second["conversations"]] == ["First question?", "Second question?"]

    panel.send({"action": "switch", "conversation": first})
    panel.wait(lambda: last_turns()["session_id"] == first)
    assert [t["question"] for t in last_turns()["turns"]] == ["First question?"]
    panel.send({"action": "switch", "conversation": "nb-not-mine"})
    refusal = panel.wait(lambda: [m for m in panel.messages() if m["type"] == "error"])[0]
    assert "No such conversation" in refusal["message"]

    # Rename: the new name is the conversation's title in every turn list from now on, kept in
    # the store (a panel reconnecting later gets it), and an empty name goes back to the question.
    panel.send({"action": "rename", "conversation": first, "title": "  Eigenvalues, week 3 "})
    panel.wait(lambda: last_turns()["conversations"][0]["title"] == "Eigenvalues, week 3")
    assert last_turns()["conversations"][1]["title"] == "Second question?"
    again = Panel(kernel)
    listed = again.wait(lambda: [m for m in again.messages() if m["type"] == "turns"])
    titles = [c["title"] for c in listed[-1]["conversations"]]
    assert titles == ["Eigenvalues, week 3", "Second question?"]
    panel.send({"action": "rename", "conversation": first, "title": ""})
    panel.wait(lambda: last_turns()["conversations"][0]["title"] == "First question?")
    panel.send({"action": "rename", "conversation": "nb-not-mine", "title": "Mine now"})
    panel.wait(lambda: len([m for m in panel.messages() if m["type"] == "error"]) == 2)
    panel.send({"action": "rename", "conversation": first, "title": "x" * 81})
    refusals = panel.wait(lambda: [m for m in panel.messages() if m["type"] == "error"][2:] or None)
    assert "at most 80 characters" in refusals[0]["message"]


def test_asking_with_no_model_configured_says_how_to_set_one_up(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    env = kernel_env(tmp_path, fake_llm)
    for name in (
        "DEEPTUTOR_PROVIDER",
        "DEEPTUTOR_MODEL",
        "DEEPTUTOR_BASE_URL",
        "DEEPTUTOR_API_KEY",
    ):
        env.pop(name)
    driver = KernelDriver(env, cwd=tmp_path)
    try:
        driver.execute("%load_ext deeptutor_jupyter")
        panel = Panel(driver)
        panel.send({"action": "ask", "question": "Hello?", "conversation": None})
        refusal = panel.wait(lambda: [m for m in panel.messages() if m["type"] == "error"])[0]
    finally:
        driver.shutdown()
    assert refusal["code"] == "not_started"
    assert "no model configured" in refusal["message"]
    assert "DEEPTUTOR_PROVIDER" in refusal["message"]
    assert fake_llm.requests == []


def test_regenerate_and_delete_over_the_comm_drive_the_cells_session(
    kernel: KernelDriver, fake_llm: FakeLLMServer
) -> None:
    """The panel's Regenerate is a turn of the kernel's one session: a %tutor cell asked next
    continues from the new answer. Delete hides the conversation; refusals come in words."""
    fake_llm.extend(
        [Reply(text="Old answer."), Reply(text="New answer."), Reply(text="From the cell.")]
    )
    panel = Panel(kernel)

    def last_turns() -> dict[str, Any]:
        return [m for m in panel.messages() if m["type"] == "turns"][-1]

    panel.send({"action": "ask", "question": "Explain rank.", "conversation": None})
    old = panel.wait(lambda: panel.events("done"))[0]["turn_id"]
    panel.send({"action": "regenerate", "turn_id": "turn-not-last"})
    refused = panel.wait(lambda: panel.errors())[0]
    assert (refused["action"], refused["code"]) == ("regenerate", "not_last")

    panel.send({"action": "regenerate", "turn_id": old})
    started = panel.wait(lambda: panel.events("turn_started")[1:])[0]
    assert started["replaces"] == old and started["question"] == "Explain rank."
    panel.wait(lambda: len(panel.events("done")) == 2)
    panel.wait(lambda: [t["turn_id"] for t in last_turns()["turns"]] == [started["turn_id"]])

    kernel.execute("%tutor And its nullity?")
    kernel.wait_for(lambda: len(fake_llm.requests) == 3)
    history = [m.get("content") for m in fake_llm.requests[2].body["messages"][1:]]
    assert history == ["Explain rank.", "New answer.", "And its nullity?"]

    conversation = last_turns()["session_id"]
    panel.send({"action": "delete", "conversation": "nb-not-mine"})
    refused = panel.wait(lambda: panel.errors()[1:])[0]
    assert (refused["action"], refused["code"]) == ("delete", "unknown")
    panel.send({"action": "delete", "conversation": conversation})
    panel.wait(lambda: last_turns()["session_id"] != conversation)
    assert last_turns()["conversations"] == [] and last_turns()["turns"] == []


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"action": "ask", "question": "   ", "conversation": None}, "Type a question"),
        ({"action": "dance"}, "Unknown action"),
        ({"action": "stop", "turn_id": "turn-nothere"}, "not running"),
        ({"action": "subscribe", "turn_id": "turn-nothere", "after_seq": 0}, "No turn"),
        (
            {"action": "answer", "request_id": "ask_x", "session_id": "s", "selections": "a"},
            "Bad answer message: selections: Input should be a valid list",
        ),
        (
            {"action": "subscribe", "turn_id": "t", "after_seq": -1},
            "after_seq: Input should be greater than or equal to 0",
        ),
        ({"action": "stop"}, "Bad stop message: turn_id: Field required"),
        ("not an object", "Unknown action '?'"),
    ],
)
def test_bad_actions_are_refused_in_words(kernel: KernelDriver, data: Any, words: str) -> None:
    panel = Panel(kernel)
    panel.send(data)
    refusal = panel.wait(lambda: [m for m in panel.messages() if m["type"] == "error"])[0]
    assert words in refusal["message"]
    kernel.execute("1 + 1")  # the kernel is still fine


def test_the_update_rate_benchmark_runs() -> None:
    """Smoke test of benchmarks/lab_updates.py: it runs and prints its lines; no time asserted."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, str(repo / "benchmarks" / "lab_updates.py"), "--quick"],
        cwd=str(repo), capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    for line in (
        "answer: 1000 tokens,",
        "content deltas emitted",
        "panel received:",
        "text intact: True",
    ):
        assert line in out.stdout
    assert "RESULT:" in out.stdout
