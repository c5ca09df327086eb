"""The configured API key appears nowhere a turn writes or shows: not in state.db (event data,
tool results, history), not in the trace JSONL, not in the widgets or the saved-notebook bundle,
even when a tool reads it from a variable and when the endpoint echoes it split across deltas."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.e2e.kernel_driver import SECRET, KernelDriver

pytestmark = pytest.mark.e2e


def every_file_under(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def test_the_key_is_scrubbed_from_everything_persisted_or_shown(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    half = len(SECRET) // 2
    fake_llm.extend(
        [
            Reply(tool_calls=[ToolCallSpec("inspect_variable", {"name": "cfg"}, id="v1")]),
            # An endpoint that echoes the key, cut in the middle of it across two deltas.
            Reply(chunks=["Your key is ", SECRET[:half], SECRET[half:], "; keep it private."]),
        ]
    )
    kernel.execute(f"cfg = {{'token': {SECRET!r}, 'n': 3}}")
    kernel.execute("%tutor what is in cfg")
    kernel.execute("import deeptutor_jupyter as d; _t = await d.wait_for_turns(30)")
    kernel.wait_for(lambda: list((tmp_path / "home" / "memory" / "trace").rglob("*.jsonl")))

    view = kernel.with_class("dt-turn")[0]
    shown = kernel.markdown_in(view)
    assert "Your key is [redacted]; keep it private." in shown
    home = every_file_under(tmp_path / "home")
    assert SECRET.encode() not in home
    assert b"[redacted]" in home  # the scrubbed answer and tool data were saved, not dropped
    outputs = json.dumps([m["content"] for m in kernel.iopub])
    assert SECRET not in outputs.replace(f"cfg = {{'token': {SECRET!r}", "")  # the cell itself
    assert "[redacted]" in outputs


# --- issue 23, item 4: every path a learner's key can take, in one kernel ------------------------

KEY_FORMS = {
    "the key": SECRET,
    "reversed": SECRET[::-1],
    "base64": base64.b64encode(SECRET.encode()).decode().rstrip("="),
}
ASK_CALL, QUIZ_CALL = "call_ask_key", "call_quiz_key"
SHORT_QUIZ: dict[str, Any] = {
    "title": "One line",
    "objective": "keys",
    "questions": [{"id": "q1", "kind": "short", "prompt": "Say it.", "reference": "a key"}],
}


def leaks(blob: bytes | str) -> list[str]:
    raw = blob.encode() if isinstance(blob, str) else blob
    return [name for name, form in KEY_FORMS.items() if form.encode() in raw]


def widget_of(k: KernelDriver, root: str, model: str) -> str:
    return str(
        k.wait_for(
            lambda: [c for c in k.descendants(root) if k.widgets[c].get("_model_name") == model]
        )[0]
    )


def first_with_class(k: KernelDriver, dom_class: str, root: str | None = None) -> str:
    found = k.wait_for(
        lambda: [c for c in k.with_class(dom_class) if root is None or c in k.descendants(root)]
    )
    return str(found[0])


def type_into(k: KernelDriver, comm_id: str, value: str) -> None:
    k.send_comm(comm_id, {"method": "update", "state": {"value": value}, "buffer_paths": []})


def finished(k: KernelDriver) -> None:
    """Every turn of the kernel has ended (its final bundle is shown before its task ends)."""
    k.execute("import deeptutor_jupyter as _d; _ = await _d.wait_for_turns(30)")


def tutor_outputs(k: KernelDriver) -> str:
    """What the saved notebook keeps of the tutor: the display, update, result and stream
    messages of every cell but the learner's own that raises the key (its error names it)."""
    own = {
        m["parent_header"].get("msg_id")
        for m in k.iopub
        if m["header"]["msg_type"] == "execute_input" and "raise" in m["content"]["code"]
    }
    kinds = ("display_data", "update_display_data", "execute_result", "stream")
    return json.dumps(
        [
            m["content"]
            for m in k.iopub
            if m["header"]["msg_type"] in kinds and m["parent_header"].get("msg_id") not in own
        ]
    )


def test_a_planted_key_is_in_no_file_output_or_request_after_every_path(
    kernel: KernelDriver, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    fake_llm.extend(
        [
            # 1. a question holding the key; the model echoes it reversed
            Reply(text=f"I will not repeat it, not even as {KEY_FORMS['reversed']}."),
            Reply(  # 2. ask_user, answered with the key typed in
                text="One question.",
                tool_calls=[
                    ToolCallSpec("ask_user", {"title": "Paste it", "mode": "text"}, id=ASK_CALL)
                ],
            ),
            Reply(text="Noted."),
            Reply(  # 3. a memory write holding the key
                tool_calls=[
                    ToolCallSpec("write_memory", {"op": "add", "text": f"Key is {SECRET}"}, id="m1")
                ]
            ),
            Reply(text="Remembered."),
            Reply(text="The error shows your key."),  # 4. %tutor why, the error names the key
            Reply(  # 5. a quiz, its short answer the key
                text="A check.", tool_calls=[ToolCallSpec("make_quiz", SHORT_QUIZ, id=QUIZ_CALL)]
            ),
            Reply(text='{"score": 1, "feedback": "Fine."}'),  # the grader's request
            Reply(text="Quiz done."),
        ]
    )
    kernel.execute(f"%tutor is {SECRET} a safe key to paste here?")
    finished(kernel)

    kernel.execute("%tutor ask me for my key")
    card = first_with_class(kernel, "dt-ask-user")
    type_into(kernel, widget_of(kernel, card, "TextModel"), SECRET)
    kernel.click(first_with_class(kernel, "dt-ask-submit", card))
    finished(kernel)

    kernel.execute("%tutor remember my key")
    finished(kernel)
    assert (home / "memory" / "L3" / "preferences.md").read_text().count("Key is [redacted]") == 1

    with pytest.raises(AssertionError, match="ValueError"):
        kernel.execute("import os\nraise ValueError(os.environ['DEEPTUTOR_API_KEY'])")
    kernel.execute("%tutor why")
    finished(kernel)

    kernel.execute("%tutor quiz me")
    quiz = first_with_class(kernel, "dt-quiz")
    type_into(kernel, widget_of(kernel, quiz, "TextareaModel"), KEY_FORMS["base64"])
    kernel.click(first_with_class(kernel, "dt-quiz-submit", quiz))
    finished(kernel)
    assert fake_llm.pending == 0  # every scripted reply was asked for: every path ran

    files = {p: p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}
    assert home / "state.db-wal" in files  # the WAL is read too, not only the checkpointed file
    found = {str(p.relative_to(home)): leaks(b) for p, b in files.items() if leaks(b)}
    assert found == {}
    assert b"[redacted]" in b"".join(files.values())  # scrubbed, not dropped

    shown = tutor_outputs(kernel)
    assert leaks(shown) == []
    # The widget state a notebook may save: every widget the tutor built (the cards' receipts
    # repeat the answers), but not the learner's own echoed keystrokes.
    built = [
        m["content"]
        for m in kernel.iopub
        if m["header"]["msg_type"].startswith("comm")
        and m["content"].get("data", {}).get("method") != "echo_update"
    ]
    assert [c for c in built if leaks(json.dumps(c))] == []
    for kept in ("is [redacted] a safe key", "not even as [redacted].", "ValueError: [redacted]"):
        assert kept in shown

    sent = [
        (r.path, json.dumps(r.body), {k: v for k, v in r.headers.items() if k != "authorization"})
        for r in fake_llm.requests
    ]
    assert len(sent) == 9
    assert [leaks(json.dumps(s)) for s in sent] == [[]] * len(sent)
    assert all(
        r.headers.get("authorization") == f"Bearer {SECRET}" for r in fake_llm.requests
    )  # the header is the key's one place
