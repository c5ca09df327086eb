"""The ask_user acceptance table of the reference, against a real kernel and FakeLLMServer.

Each test keeps the evidence the reference asks for: the raw event log (state.db), the fake
server's request log showing the tool message with the original tool call id, and the audit line.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.store.db import Store
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.e2e.conftest import kernel_env
from tests.e2e.kernel_driver import KernelDriver, shown_text

pytestmark = pytest.mark.e2e

OPTIONS = [
    {"id": "safe", "label": "Analyse first", "description": "Read and plan", "recommended": True},
    {"id": "implement", "label": "Just do it"},
]


def ask(mode: str = "single", call_id: str = "call_ask_1", **extra: Any) -> Reply:
    args = {"title": "How should we proceed?", "mode": mode, **extra}
    if mode in ("single", "multiple", "toggle"):
        args.setdefault("options", OPTIONS)
    return Reply(
        text="One question first.", tool_calls=[ToolCallSpec("ask_user", args, id=call_id)]
    )


def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def events(tmp_path: Path, kind: str) -> list[dict[str, Any]]:
    with sqlite3.connect(home(tmp_path) / "state.db") as db:
        rows = db.execute("SELECT data FROM events WHERE type = ? ORDER BY rowid", (kind,))
        return [json.loads(r[0]) for r in rows]


def rows(tmp_path: Path, sql: str) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(home(tmp_path) / "state.db")
    try:
        return list(db.execute(sql))
    finally:
        db.close()


def audit(tmp_path: Path) -> list[dict[str, Any]]:
    path = home(tmp_path) / "audit" / "interactions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def tool_messages(server: FakeLLMServer, call_id: str) -> list[dict[str, Any]]:
    return [
        m
        for r in server.requests
        for m in r.body.get("messages", [])
        if m.get("role") == "tool" and m.get("tool_call_id") == call_id
    ]


def card_of(k: KernelDriver, nth: int = 0) -> str:
    cards = k.wait_for(
        lambda: len(k.with_class("dt-ask-user")) > nth and k.with_class("dt-ask-user")
    )
    return str(cards[nth])


def inside(k: KernelDriver, root: str, model: str) -> list[str]:
    """Widgets of a model class under root, waiting for the kernel to have sent them."""
    return list(
        k.wait_for(
            lambda: [c for c in k.descendants(root) if k.widgets[c].get("_model_name") == model]
        )
    )


def button(k: KernelDriver, root: str, dom_class: str) -> str:
    found = k.wait_for(lambda: [c for c in k.with_class(dom_class) if c in k.descendants(root)])
    return str(found[0])


def update(k: KernelDriver, comm_id: str, **state: Any) -> None:
    k.send_comm(comm_id, {"method": "update", "state": state, "buffer_paths": []})


def answer_text(k: KernelDriver) -> str:
    return "".join(k.markdown_in(v) for v in k.with_class("dt-turn"))


def receipt_text(k: KernelDriver, card: str) -> str:
    receipts = [c for c in k.with_class("dt-ask-receipt") if c in k.descendants(card) or c == card]
    return "\n".join(k.html_in(r) or str(k.widgets[r].get("value", "")) for r in receipts)


def run_in_kernel(k: KernelDriver, code: str) -> str:
    msg_id = k.execute(code)
    return k.stream_text(msg_id)


def test_single_choice_becomes_the_tool_result_and_the_turn_goes_on(kernel, fake_llm, tmp_path):
    fake_llm.extend([ask(), Reply(text="Good: we analyse first.")])
    kernel.execute("%tutor Help me with my project")
    card = card_of(kernel)
    radio = inside(kernel, card, "RadioButtonsModel")[0]
    update(kernel, radio, index=0)
    kernel.click(button(kernel, card, "dt-ask-submit"))
    kernel.wait_for(lambda: "Good: we analyse first." in answer_text(kernel))

    required = events(tmp_path, "user_input_required")
    assert required[0]["tool_call_id"] == "call_ask_1" and required[0]["mode"] == "single"
    assert [o["id"] for o in required[0]["options"]] == ["safe", "implement"]
    sent = tool_messages(fake_llm, "call_ask_1")
    assert len(sent) == 1
    assert json.loads(sent[0]["content"]) == {
        "selections": ["safe"],
        "customInput": "",
        "cancelled": False,
    }
    assert "Analyse first" in receipt_text(kernel, card)
    view = kernel.with_class("dt-turn")[0]
    kernel.wait_for(lambda: "done" in kernel.html_in(view))
    # Once the turn has finished, the receipt no longer says it is continuing.
    kernel.wait_for(lambda: "continues" not in receipt_text(kernel, card))
    assert "Answered at" in receipt_text(kernel, card)
    lines = audit(tmp_path)
    assert [e["event"] for e in lines] == ["asked", "answered"]
    assert lines[1]["selections"] == ["safe"] and lines[1]["tool_call_id"] == "call_ask_1"


def test_multiple_with_custom_input_reaches_the_model_verbatim(kernel, fake_llm, tmp_path):
    secret = "my teacher is Ms. Zhang 张老师 <b>"
    fake_llm.extend([ask("multiple", allowCustom=True), Reply(text="Noted both.")])
    kernel.execute("%tutor Plan my week")
    card = card_of(kernel)
    boxes = inside(kernel, card, "CheckboxModel")
    for box in boxes:
        update(kernel, box, value=True)
    custom = inside(kernel, card, "TextModel")[0]
    update(kernel, custom, value=secret)
    kernel.click(button(kernel, card, "dt-ask-submit"))
    kernel.wait_for(lambda: "Noted both." in answer_text(kernel))
    result = json.loads(tool_messages(fake_llm, "call_ask_1")[0]["content"])
    assert result == {
        "selections": ["safe", "implement"],
        "customInput": secret,
        "cancelled": False,
    }
    receipt = receipt_text(kernel, card)
    assert "Analyse first" in receipt and "Just do it" in receipt
    assert "Ms. Zhang 张老师 &lt;b&gt;" in receipt
    # The audit log keeps the length of the free text, never the text.
    raw = (home(tmp_path) / "audit" / "interactions.jsonl").read_text()
    assert "Zhang" not in raw and "张老师" not in raw
    assert audit(tmp_path)[-1]["custom_input_length"] == len(secret)


def test_cancel_stops_the_turn_without_asking_again(kernel, fake_llm, tmp_path):
    fake_llm.extend([ask()])
    kernel.execute("%tutor Help me")
    card = card_of(kernel)
    kernel.click(button(kernel, card, "dt-ask-cancel"))
    view = kernel.with_class("dt-turn")[0]
    kernel.wait_for(lambda: "done" in kernel.html_in(view))
    kernel.pump(0.5)
    assert len(fake_llm.requests) == 1  # no further round, so no new question
    assert len(kernel.with_class("dt-ask-user")) == 1
    with sqlite3.connect(home(tmp_path) / "state.db") as db:
        history = [
            json.loads(r[0]) for r in db.execute("SELECT message FROM messages ORDER BY idx")
        ]
    tool = [m for m in history if m["role"] == "tool"]
    assert tool == [
        {
            "role": "tool",
            "tool_call_id": "call_ask_1",
            "content": json.dumps({"selections": [], "customInput": "", "cancelled": True}),
        }
    ]
    assert audit(tmp_path)[-1]["event"] == "cancelled"


def test_duplicate_and_foreign_submissions_are_refused(kernel, fake_llm, tmp_path):
    fake_llm.extend([ask(), Reply(text="Thanks.")])
    kernel.execute("%tutor Help me")
    card = card_of(kernel)
    req = events(tmp_path, "user_input_required")[0]
    rid, sid = req["id"], req["session_id"]
    out = run_in_kernel(
        kernel,
        "from deeptutor_jupyter import submit_user_input\n"
        "from deeptutor_jupyter.interaction.coordinator import InteractionError\n"
        "try:\n"
        f"    submit_user_input('nb-someone-else', {rid!r}, ['safe'])\n"
        "except InteractionError as e:\n"
        "    print('refused', e.code)\n",
    )
    assert "refused foreign_session" in out
    assert fake_llm.pending == 1 and not tool_messages(fake_llm, "call_ask_1")
    # Still pending and answerable by its own session.
    out = run_in_kernel(kernel, f"print(submit_user_input({sid!r}, {rid!r}, ['implement']))")
    assert "'implement'" in out
    kernel.wait_for(lambda: "Thanks." in answer_text(kernel))
    out = run_in_kernel(
        kernel,
        "try:\n"
        f"    submit_user_input({sid!r}, {rid!r}, ['safe'])\n"
        "except InteractionError as e:\n"
        "    print('refused', e.code)\n",
    )
    assert "refused duplicate" in out
    # The card answered through the API turned into a receipt of that answer.
    kernel.wait_for(lambda: "Just do it" in receipt_text(kernel, card))
    assert not [c for c in kernel.with_class("dt-ask-submit") if c in kernel.descendants(card)]
    assert len(tool_messages(fake_llm, "call_ask_1")) == 1
    assert json.loads(tool_messages(fake_llm, "call_ask_1")[0]["content"])["selections"] == [
        "implement"
    ]
    events_ = [e["event"] for e in audit(tmp_path)]
    assert events_.count("answered") == 1 and events_.count("rejected") == 2


def test_invalid_answers_are_refused_and_the_question_stays_open(kernel, fake_llm, tmp_path):
    fake_llm.extend([ask("directory"), Reply(text="data it is.")])
    kernel.execute("%tutor Where is the data?")
    card = card_of(kernel)
    field = inside(kernel, card, "ComboboxModel")[0]
    update(kernel, field, value="../elsewhere")
    kernel.click(button(kernel, card, "dt-ask-submit"))
    kernel.wait_for(lambda: "is outside the notebook" in kernel.html_in(card))
    assert not tool_messages(fake_llm, "call_ask_1")
    update(kernel, field, value="data")
    # The error belonged to the refused value; the fixed one clears it.
    kernel.wait_for(lambda: "outside" not in kernel.html_in(card))
    kernel.click(button(kernel, card, "dt-ask-submit"))
    kernel.wait_for(lambda: "data it is." in answer_text(kernel))
    assert json.loads(tool_messages(fake_llm, "call_ask_1")[0]["content"])["customInput"] == "data"


def test_pending_restores_the_card_and_answering_it_continues_the_turn(kernel, fake_llm, tmp_path):
    fake_llm.extend([ask(), Reply(text="Continuing after reload.")])
    kernel.execute("%tutor Help me")
    card_of(kernel)
    kernel.execute("%tutor pending")  # what a reloaded page does to get its card back
    restored = card_of(kernel, nth=1)
    radio = inside(kernel, restored, "RadioButtonsModel")[0]
    update(kernel, radio, index=1)
    kernel.click(button(kernel, restored, "dt-ask-submit"))
    kernel.wait_for(lambda: "Continuing after reload." in answer_text(kernel))
    result = json.loads(tool_messages(fake_llm, "call_ask_1")[0]["content"])
    assert result["selections"] == ["implement"]
    first = kernel.with_class("dt-ask-user")[0]
    kernel.wait_for(lambda: "Just do it" in receipt_text(kernel, first))


def test_kernel_restart_resumes_the_exact_turn(tmp_path):
    with FakeLLMServer() as server:
        server.extend([ask(), Reply(text="Resumed: analysing first.")])
        k = KernelDriver(kernel_env(tmp_path, server), cwd=tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter\n%tutor Help me with my project")
            card_of(k)
            sql = "SELECT turn_id, request_id FROM pending"
            (turn_id, request_id), *_ = k.wait_for(lambda: rows(tmp_path, sql))
            # The waiting bundle leaves the kernel just after the card; a restart now would kill
            # the kernel before its iopub thread sent it (seen once on a loaded machine). (A
            # first turn's earlier update is its widget replacing the running Markdown.)
            k.wait_for(lambda: waiting_updates(k, turn_id))
            k.restart()
            k.execute("%load_ext deeptutor_jupyter\n%tutor pending")
            card = card_of(k)
            radio = inside(k, card, "RadioButtonsModel")[0]
            update(k, radio, index=0)
            k.click(button(k, card, "dt-ask-submit"))
            k.wait_for(lambda: "Resumed: analysing first." in answer_text(k))
            second = server.requests[1].body["messages"]
            assistant = next(m for m in second if m.get("tool_calls"))
            assert assistant["tool_calls"][0]["id"] == "call_ask_1"
            tool = tool_messages(server, "call_ask_1")
            assert len(tool) == 1
            assert json.loads(tool[0]["content"])["selections"] == ["safe"]
            assert second[1] == {"role": "user", "content": "Help me with my project"}
            # Replayed through the store: runs of streamed text are saved as one row each.
            store = Store(home(tmp_path) / "state.db")
            try:
                seqs = [seq for seq, _kind, _data in store.events(turn_id)]
            finally:
                store.close()
            assert seqs == list(range(1, len(seqs) + 1))  # one turn, one unbroken event log
            # The saved notebook tells the truth: while waiting, the first cell says how to
            # answer after a restart; at the end the answer reaches both the cell where the
            # learner answered and the cell that asked, with the trace.
            assert waiting_updates(k, turn_id)
            for display_id in (turn_id, f"pending-{request_id}"):
                final = k.wait_for(
                    lambda d=display_id: [
                        u for u in display_updates(k, d) if "Resumed" in shown_text(u)
                    ]
                )
                assert "application/vnd.deeptutor.trace+json" in final[-1]
                # The resumed turn says first what was answered, as the live turn would have.
                assert "You answered: Analyse first" in shown_text(final[-1])
        finally:
            k.shutdown()


def waiting_updates(k: KernelDriver, turn_id: str) -> list[dict[str, Any]]:
    """The updates of the asking cell that say how to answer after a restart."""
    return [
        u for u in display_updates(k, turn_id) if "%tutor pending" in u.get("text/markdown", "")
    ]


def display_updates(k: KernelDriver, display_id: str) -> list[dict[str, Any]]:
    """The bundles a display id was updated to, in order (what the saved notebook keeps)."""
    return [
        m["content"]["data"]
        for m in k.iopub
        if m["header"]["msg_type"] == "update_display_data"
        and m["content"].get("transient", {}).get("display_id") == display_id
    ]


def test_kernel_restart_without_a_saved_state_says_it_cannot_continue(tmp_path):
    with FakeLLMServer() as server:
        server.extend([ask()])
        k = KernelDriver(kernel_env(tmp_path, server), cwd=tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter\n%tutor Help me")
            card_of(k)
            k.restart()
            with sqlite3.connect(home(tmp_path) / "state.db") as db:
                db.execute("DELETE FROM turn_states")
            k.execute("%load_ext deeptutor_jupyter\n%tutor pending")
            card = card_of(k)
            assert "can no longer continue" in k.html_in(card)
            assert not [c for c in k.with_class("dt-ask-submit") if c in k.descendants(card)]
            assert len(server.requests) == 1
        finally:
            k.shutdown()


def test_an_unanswered_question_times_out_with_a_receipt(tmp_path):
    with FakeLLMServer() as server:
        server.extend([ask()])
        env = kernel_env(tmp_path, server, DEEPTUTOR_ASK_TIMEOUT_HOURS="0.0003")  # about 1 s
        k = KernelDriver(env, cwd=tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter\n%tutor Help me")
            card = card_of(k)
            k.wait_for(
                lambda: "Timed out" in k.html_in(card) or "Timed out" in receipt_text(k, card)
            )
            view = k.with_class("dt-turn")[0]
            k.wait_for(lambda: "done" in k.html_in(view))
            assert audit(tmp_path)[-1]["event"] == "expired"
            messages = [json.loads(m) for (m,) in rows(tmp_path, "SELECT message FROM messages")]
            content = next(m["content"] for m in messages if m["role"] == "tool")
            assert json.loads(content) == {
                "selections": [],
                "customInput": "",
                "cancelled": True,
                "reason": "timeout",
            }
        finally:
            k.shutdown()


def test_a_resumed_turn_keeps_its_knowledge_base(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "eigen.md").write_text("# Eigenvalues\nAn eigenvalue scales its eigenvector.\n")
    with FakeLLMServer() as server:
        server.extend(
            [
                ask(),
                Reply(
                    text="Searching.",
                    tool_calls=[ToolCallSpec("search_knowledge", {"query": "eigenvalue"}, id="s")],
                ),
                Reply(text="It scales its eigenvector [1]."),
            ]
        )
        k = KernelDriver(kernel_env(tmp_path, server), cwd=tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter")
            k.execute(f"%tutor kb add course {notes}")
            k.wait_for(lambda: any("chunk" in str(w.get("value", "")) for w in k.widgets.values()))
            k.execute("%tutor --kb course what does an eigenvalue do")
            card_of(k)
            k.restart()
            k.execute("%load_ext deeptutor_jupyter\n%tutor pending")
            card = card_of(k)
            update(k, inside(k, card, "RadioButtonsModel")[0], index=0)
            k.click(button(k, card, "dt-ask-submit"))
            k.wait_for(lambda: "It scales its eigenvector" in answer_text(k))
            found = next(
                m["content"]
                for m in server.requests[2].body["messages"]
                if m.get("tool_call_id") == "s"
            )
            assert "An eigenvalue scales its eigenvector." in found
        finally:
            k.shutdown()
