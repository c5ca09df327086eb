"""%tutor in a real kernel against FakeLLMServer, read back from the widgets' state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deeptutor_jupyter.kernel.display import VIEW_MIME, WIDGET_MIME
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from deeptutor_jupyter.testing.ports import refused_port
from tests.e2e.conftest import SECRET, kernel_env
from tests.e2e.kernel_driver import KernelDriver, shown_text

pytestmark = pytest.mark.e2e


def turn_views(k: KernelDriver) -> list[str]:
    return k.with_class("dt-turn")


def status_of(k: KernelDriver, view: str) -> str:
    status = k.with_class("dt-status")
    mine = [s for s in status if s in k.descendants(view)]
    return str(k.widgets[mine[0]]["value"]) if mine else ""


def wait_done(k: KernelDriver, view: str, word: str = "done") -> str:
    return str(k.wait_for(lambda: word in status_of(k, view) and status_of(k, view)))


def test_answer_streams_into_the_cell_as_markdown(kernel: KernelDriver, fake_llm: FakeLLMServer):
    answer = "An **eigenvector** keeps its direction: $A v = \\lambda v$."
    fake_llm.add(
        Reply(
            text=answer,
            chunks=["An **eigen", "vector** keeps its ", "direction: $A v = \\lambda v$."],
        )
    )
    msg_id = kernel.execute("%tutor What is an eigenvector, intuitively?")
    view = kernel.wait_for(lambda: turn_views(kernel) and turn_views(kernel)[0])
    kernel.wait_for(lambda: kernel.markdown_in(view) == answer)
    status = wait_done(kernel, view)
    assert "/fake-model" in status

    sent = fake_llm.requests[0].body
    assert sent["stream"] is True
    assert sent["messages"][0]["role"] == "system"
    assert sent["messages"][-1] == {
        "role": "user",
        "content": "What is an eigenvector, intuitively?",
    }
    assert fake_llm.requests[0].headers["authorization"] == f"Bearer {SECRET}"

    # The saved notebook reads well without widgets: the final bundle carries the answer.
    kernel.wait_for(
        lambda: any(
            m["header"]["msg_type"] == "update_display_data"
            and "An eigenvector keeps its direction: $A v = \\lambda v$."
            in shown_text(m["content"]["data"])
            for m in kernel.iopub
        )
    )
    # The cell shows the turn under its display id from the start, and its live view there: at
    # once, or (a kernel's first turn, its request sent first) by an update of that display.
    first = [m for m in kernel.outputs_of(msg_id) if m["header"]["msg_type"] == "display_data"]
    display_id = first[0]["content"]["transient"]["display_id"]
    assert first[0]["content"]["data"][VIEW_MIME]["display_id"] == display_id
    assert any(
        WIDGET_MIME in m["content"]["data"]
        and m["content"].get("transient", {}).get("display_id") == display_id
        for m in kernel.iopub
        if m["header"]["msg_type"] in ("display_data", "update_display_data")
    )
    assert SECRET not in json.dumps([m["content"] for m in kernel.iopub])


def test_follow_up_continues_and_new_starts_fresh(kernel: KernelDriver, fake_llm: FakeLLMServer):
    fake_llm.extend([Reply(text="A vector space."), Reply(text="Yes, closed."), Reply(text="Hi.")])
    kernel.execute("%tutor What is R^2?")
    kernel.wait_for(lambda: len(fake_llm.requests) == 1)
    kernel.wait_for(lambda: any("done" in status_of(kernel, v) for v in turn_views(kernel)))
    kernel.execute("%%tutor\nIs it closed under addition?")
    kernel.wait_for(lambda: sum("done" in status_of(kernel, v) for v in turn_views(kernel)) == 2)
    second = fake_llm.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[1]["content"] == "What is R^2?"
    assert second[2]["content"] == "A vector space."
    assert second[3]["content"] == "Is it closed under addition?"

    kernel.execute("%tutor --new Hello again")
    kernel.wait_for(lambda: len(fake_llm.requests) == 3)
    third = fake_llm.requests[2].body["messages"]
    assert [m["role"] for m in third] == ["system", "user"]


def test_tool_call_shows_a_card_and_the_result_goes_back(
    kernel: KernelDriver, fake_llm: FakeLLMServer
):
    fake_llm.extend(
        [
            Reply(
                text="Let me compute.",
                tool_calls=[ToolCallSpec("calculate", {"expression": "6*7"}, id="call_1")],
            ),
            Reply(text="It is **42**."),
        ]
    )
    kernel.execute("%tutor What is 6*7?")
    view = kernel.wait_for(lambda: turn_views(kernel) and turn_views(kernel)[0])
    wait_done(kernel, view)
    titles = kernel.titles_in(view)
    assert any(t.startswith("✓ calculate") for t in titles), titles
    assert "Let me compute." in kernel.markdown_in(view)
    assert kernel.markdown_in(view).endswith("It is **42**.")
    tool_msgs = [m for m in fake_llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert tool_msgs == [{"role": "tool", "tool_call_id": "call_1", "content": "6*7 = 42"}]


def test_stop_button_cancels_the_turn(kernel: KernelDriver, fake_llm: FakeLLMServer):
    fake_llm.add(Reply(chunks=[f"word{i} " for i in range(200)], chunk_delay=0.05))
    kernel.execute("%tutor Tell me a long story")
    view = kernel.wait_for(lambda: turn_views(kernel) and turn_views(kernel)[0])
    kernel.wait_for(lambda: "word3" in kernel.markdown_in(view))
    stop = next(b for b in kernel.with_class("dt-stop") if b in kernel.descendants(view))
    # What a browser's console can send the line: messages that are no click stop nothing...
    for content in (None, ["click"], {"event": {"click": 1}}, {"event": "clicked"}, "click"):
        kernel.send_comm(stop, {"method": "custom", "content": content})
    kernel.send_comm(stop, {"method": "custom"})
    seen = kernel.markdown_in(view)
    kernel.wait_for(lambda: kernel.markdown_in(view) != seen)  # the answer streams on
    assert "stopped" not in status_of(kernel, view)
    # ...and a flood of clicks stops this turn once, and no later one.
    for _ in range(50):
        kernel.click(stop)
    wait_done(kernel, view, "stopped")
    shown = kernel.markdown_in(view)
    assert "word199" not in shown
    kernel.pump(0.5)
    assert kernel.markdown_in(view) == shown  # nothing streams after the stop
    fake_llm.add(Reply(text="Next answer."))
    kernel.execute("%tutor And then?")
    later = kernel.wait_for(lambda: [v for v in turn_views(kernel) if v != view])[0]
    wait_done(kernel, later)
    assert kernel.markdown_in(later) == "Next answer."


def test_rerunning_a_cell_cancels_its_previous_turn(kernel: KernelDriver, fake_llm: FakeLLMServer):
    fake_llm.extend(
        [Reply(chunks=[f"a{i} " for i in range(200)], chunk_delay=0.05), Reply(text="second")]
    )
    kernel.execute("%tutor first", cell_id="cell-A")
    first = kernel.wait_for(lambda: turn_views(kernel) and turn_views(kernel)[0])
    kernel.wait_for(lambda: "a2" in kernel.markdown_in(first))
    kernel.execute("%tutor again", cell_id="cell-A")
    wait_done(kernel, first, "stopped")
    second = kernel.wait_for(lambda: [v for v in turn_views(kernel) if v != first])[0]
    kernel.wait_for(lambda: kernel.markdown_in(second) == "second")


def _error_text(k: KernelDriver, view: str) -> str:
    return "\n".join(
        str(k.widgets[c]["value"]) for c in k.with_class("dt-error") if c in k.descendants(view)
    )


def test_rejected_key_renders_an_error_card(tmp_path: Path):
    with FakeLLMServer(api_key="sk-the-right-one") as server:
        k = KernelDriver(kernel_env(tmp_path, server), cwd=tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter\n%tutor hello")
            view = k.wait_for(lambda: turn_views(k) and turn_views(k)[0])
            wait_done(k, view, "failed")
            text = _error_text(k, view)
            assert "key was rejected" in text
            assert SECRET not in json.dumps([m["content"] for m in k.iopub])
        finally:
            k.shutdown()


def test_unknown_model_renders_an_error_card(tmp_path: Path):
    with FakeLLMServer(models=["real-model"]) as server:
        k = KernelDriver(kernel_env(tmp_path, server), cwd=tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter\n%tutor hello")
            view = k.wait_for(lambda: turn_views(k) and turn_views(k)[0])
            wait_done(k, view, "failed")
            text = _error_text(k, view)
            assert "fake-model" in text and "not found" in text
        finally:
            k.shutdown()


def test_no_server_renders_an_error_card(tmp_path: Path):
    port = refused_port()
    with FakeLLMServer() as server:
        env = kernel_env(tmp_path, server, DEEPTUTOR_BASE_URL=f"http://127.0.0.1:{port}/v1")
    k = KernelDriver(env, cwd=tmp_path)
    try:
        k.execute("%load_ext deeptutor_jupyter\n%tutor hello")
        view = k.wait_for(lambda: turn_views(k) and turn_views(k)[0], timeout=60)
        wait_done(k, view, "failed")
        assert f"127.0.0.1:{port}" in _error_text(k, view)
    finally:
        k.shutdown()


def test_config_masks_the_key_and_help_is_real(kernel: KernelDriver):
    msg_id = kernel.execute("%tutor config")
    shown = json.dumps([m["content"] for m in kernel.outputs_of(msg_id)])
    assert "fake-model" in shown and "DEEPTUTOR_MODEL" in shown
    assert "Code answers of quizzes run " in shown or "Code answers are not run on this" in shown
    assert SECRET not in shown
    kernel.execute("%tutor?")
    pages = kernel.last_reply["content"]["payload"]
    help_text = pages[0]["data"]["text/plain"]
    assert "ask the AI tutor" in help_text and "--new" in help_text
    # %tutor? and %tutor help are one text: every subcommand, in both.
    msg_id = kernel.execute("%tutor help")
    shown = "".join(m["content"]["data"]["text/plain"] for m in kernel.outputs_of(msg_id))
    for command in ("config", "why", "stop", "pending [--all]", "memory ...", "kb ..."):
        assert f"%tutor {command}" in help_text and f"%tutor {command}" in shown


def test_a_long_answer_is_coalesced_into_few_widget_messages(
    kernel: KernelDriver, fake_llm: FakeLLMServer
):
    chunks = [f"t{i} " for i in range(10_000)]
    fake_llm.add(Reply(chunks=chunks))
    kernel.execute("%tutor Write a lot")
    view = kernel.wait_for(lambda: turn_views(kernel) and turn_views(kernel)[0])
    wait_done(kernel, view)
    assert kernel.markdown_in(view) == "".join(chunks)
    # The answer's deltas (kernel/widgets/answer_stream.py): about one a second, not a token each.
    updates = [
        m
        for m in kernel.iopub
        if m["header"]["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "custom"
    ]
    assert 1 <= len(updates) < 200, len(updates)


def test_thinking_is_shown_apart_from_the_answer(kernel: KernelDriver, fake_llm: FakeLLMServer):
    fake_llm.add(
        Reply(chunks=["<thi", "nk>the learner wants a hint</th", "ink>Try a smaller case."])
    )
    kernel.execute("%tutor hint please")
    view = kernel.wait_for(lambda: turn_views(kernel) and turn_views(kernel)[0])
    wait_done(kernel, view)
    assert kernel.markdown_in(view) == "Try a smaller case."
    assert "the learner wants a hint" in kernel.html_in(view)
    assert "Thinking" in kernel.titles_in(view)


def test_without_a_model_the_setup_card_explains_what_to_do(tmp_path: Path):
    with FakeLLMServer() as server:
        env = kernel_env(tmp_path, server)
    for name in (
        "DEEPTUTOR_PROVIDER",
        "DEEPTUTOR_BASE_URL",
        "DEEPTUTOR_MODEL",
        "DEEPTUTOR_API_KEY",
    ):
        env.pop(name)
    k = KernelDriver(env, cwd=tmp_path)
    try:
        k.execute("%load_ext deeptutor_jupyter\n%tutor hello")
        assert not turn_views(k)
        shown = json.dumps(list(k.widgets.values()))
        assert "Ollama" in shown and "OpenAI" in shown
        assert not (tmp_path / "home" / "state.db").exists()
    finally:
        k.shutdown()


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (Reply(chunks=["The answer ", "is ", "forty"], break_after=2), "dropped"),
        (Reply(raw_sse=["data: {not json\n\n"]), "not JSON"),
        (Reply(status=400, error="max_tokens is too large"), "max_tokens is too large"),
    ],
    ids=["broken-stream", "malformed", "bad-request"],
)
def test_each_failure_renders_a_card_that_says_what_happened(
    kernel: KernelDriver, fake_llm: FakeLLMServer, reply: Reply, words: str
):
    fake_llm.add(reply)
    kernel.execute("%tutor hello")
    view = kernel.wait_for(lambda: turn_views(kernel) and turn_views(kernel)[0])
    wait_done(kernel, view, "failed")
    assert words in _error_text(kernel, view)


def test_the_question_that_waited_for_a_model_runs_once_the_setup_card_is_saved(tmp_path: Path):
    with FakeLLMServer([Reply(text="Four, from the model you just set up.")]) as server:
        env = kernel_env(tmp_path, server)
        for name in ("DEEPTUTOR_PROVIDER", "DEEPTUTOR_BASE_URL", "DEEPTUTOR_MODEL"):
            env.pop(name)
        k = KernelDriver(env, cwd=tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter\n%tutor What is 2+2?")
            card = k.wait_for(lambda: k.with_class("dt-setup-card"))[0]

            def widget(model: str, description: str) -> str:
                return str(
                    next(
                        c
                        for c in k.descendants(card)
                        if k.widgets[c].get("_model_name") == model
                        and k.widgets[c].get("description") == description
                    )
                )

            provider = widget("DropdownModel", "Provider")
            labels = list(k.widgets[provider]["_options_labels"])
            choice = next(i for i, label in enumerate(labels) if "compatible" in label)
            k.send_comm(provider, {"method": "update", "state": {"index": choice}})
            for description, value in (("Model", "fake-model"), ("Base URL", server.url)):
                k.send_comm(
                    widget("TextModel", description),
                    {"method": "update", "state": {"value": value}},
                )
            k.pump(0.5)
            k.click(widget("ButtonModel", "Save"))
            # No need to run the cell again: the waiting question goes to the model now.
            k.wait_for(lambda: server.requests, timeout=20)
            asked = server.requests[0].body["messages"]
            assert asked[-1] == {"role": "user", "content": "What is 2+2?"}
            k.wait_for(lambda: "Four, from the model" in json.dumps(list(k.widgets.values())))
            said = json.dumps(list(k.widgets.values()))
            assert "Your question runs now, below." in said and "cell again" not in said
        finally:
            k.shutdown()
