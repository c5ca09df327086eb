"""``%tutor`` in a terminal IPython: no running loop, no widgets, the answer printed as it streams.

ask_user has no form there: the model receives the explicit degraded tool result (ask in plain
text) and the loop goes on to the answer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.kernel.tutor_shell import tutor_shell


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def shell(
    tmp_path: Path, server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[InteractiveShell]:
    for name in list(os.environ):
        if name.startswith("DEEPTUTOR_") or name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DEEPTUTOR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DEEPTUTOR_AUTO_CONSOLIDATE", "false")
    monkeypatch.setenv("DEEPTUTOR_PROVIDER", "custom")
    monkeypatch.setenv("DEEPTUTOR_BASE_URL", server.url)
    monkeypatch.setenv("DEEPTUTOR_MODEL", "fake-model")
    monkeypatch.setenv("DEEPTUTOR_LANGUAGE", "en")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.chdir(tmp_path)
    with tutor_shell() as sh:
        yield sh


def tool_messages(server: FakeLLMServer, call_id: str) -> list[dict[str, Any]]:
    return [
        m
        for r in server.requests
        for m in r.body.get("messages", [])
        if m.get("role") == "tool" and m.get("tool_call_id") == call_id
    ]


def test_the_answer_is_printed_in_a_terminal(
    shell: InteractiveShell, server: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.add(Reply(chunks=["An eigenvector ", "keeps its direction."]))
    shell.run_line_magic("tutor", "What is an eigenvector?")
    out = capsys.readouterr().out
    assert "An eigenvector keeps its direction." in out
    assert len(server.requests) == 1
    sent = server.requests[0].body["messages"]
    assert sent[-1] == {"role": "user", "content": "What is an eigenvector?"}


def test_ask_user_gets_the_degraded_result_and_the_turn_goes_on(
    shell: InteractiveShell,
    server: FakeLLMServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = {
        "title": "Which level?",
        "mode": "single",
        "options": [{"id": "intro", "label": "Intro"}, {"id": "adv", "label": "Advanced"}],
    }
    server.extend(
        [
            Reply(text="Let me ask.", tool_calls=[ToolCallSpec("ask_user", args, id="call_t1")]),
            Reply(text="Are you new to linear algebra? Meanwhile: it keeps its direction."),
        ]
    )
    shell.run_line_magic("tutor", "Explain eigenvectors")
    out = capsys.readouterr().out
    assert "Are you new to linear algebra? Meanwhile: it keeps its direction." in out
    assert "[ask_user]" in out and "no form available here" in out

    assert len(server.requests) == 2
    second = server.requests[1].body["messages"]
    assistant = next(m for m in second if m.get("tool_calls"))
    assert assistant["tool_calls"][0]["id"] == "call_t1"
    tool = tool_messages(server, "call_t1")
    assert len(tool) == 1
    assert "plain text" in tool[0]["content"]
    assert "selections" not in tool[0]["content"]  # no invented answer
    with pytest.raises(ValueError):
        json.loads(tool[0]["content"])
    # Nothing was left waiting: no pending question, no audit of a question never shown.
    magics = shell.magics_manager.registry["TutorMagics"]
    assert magics.state.session.pending(all_sessions=True) == []
    assert not (tmp_path / "home" / "audit" / "interactions.jsonl").exists()
    turn = magics.state.session.turns[-1]
    assert turn.status == "done"
    assert [m["role"] for m in turn.messages] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize("flags", ["--max-rounds lots", "--temperature warm", "--timeout -5"])
def test_a_flag_with_a_bad_value_is_refused_not_silently_ignored(
    shell: InteractiveShell,
    server: FakeLLMServer,
    capsys: pytest.CaptureFixture[str],
    flags: str,
) -> None:
    server.add(Reply(text="answered with the defaults"))
    shell.run_line_magic("tutor", f"{flags} What is an eigenvector?")
    out = capsys.readouterr().out
    assert flags.split()[0] in out
    assert server.requests == []


def test_a_home_others_can_read_is_tightened_and_the_cell_says_so_once(
    shell: InteractiveShell,
    server: FakeLLMServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    os.chmod(home, 0o755)
    server.extend([Reply(text="One."), Reply(text="Two.")])
    shell.run_line_magic("tutor", "first")
    out = capsys.readouterr().out
    assert "One." in out
    assert f"Your tutor folder {home} was readable by other users" in out
    assert os.stat(home).st_mode & 0o777 == 0o700
    shell.run_line_magic("tutor", "second")
    out = capsys.readouterr().out
    assert "Two." in out and "readable by other users" not in out


def test_a_home_that_cannot_be_created_is_a_message_not_a_traceback(
    shell: InteractiveShell,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("DEEPTUTOR_HOME", str(blocker / "home"))
    monkeypatch.setenv("DEEPTUTOR_AUTO_CONSOLIDATE", "false")
    shell.run_line_magic("tutor", "hello")
    captured = capsys.readouterr()
    assert "Not started." in captured.out and "a-file" in captured.out
    assert "Traceback" not in captured.out + captured.err
