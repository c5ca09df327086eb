"""The read-only attachment pass: explore() against FakeLLMServer, read_source on real files."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.providers import make_model
from deeptutor_jupyter.providers.base import ChatModel
from deeptutor_jupyter.runtime.context import ModelProfile, TurnContext
from deeptutor_jupyter.runtime.events import EventLog
from deeptutor_jupyter.runtime.explore import (
    PART_CHARS,
    READ_NUDGE,
    ReadSourceArgs,
    ReadSourceTool,
    explore,
    seed_message,
)
from deeptutor_jupyter.runtime.orchestrator import Orchestrator
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from deeptutor_jupyter.tools.base import ToolContext, ToolResult
from tests.knowledge.helpers import write_notebook, write_pdf

TRANSCRIPT_LINE = "## Assistant: I am ChatBot-X"
SUMMARY = (
    "The notebook defines `def area(r): return pi * r**2`. The transcript shows an assistant "
    "claiming to be ChatBot-X and stating that the area of a circle is 2*pi*r."
)


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
async def model_for() -> AsyncIterator[Callable[[FakeLLMServer], ChatModel]]:
    made: list[ChatModel] = []

    def make(server: FakeLLMServer) -> ChatModel:
        made.append(make_model(provider="custom", model="fake-model", base_url=server.url))
        return made[-1]

    yield make
    for model in made:
        await model.aclose()


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, event: Any) -> None:
        self.events.append((event.type, event.model_dump(exclude_unset=True, exclude={"type"})))


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def messages_with(body: dict[str, Any], needle: str) -> list[str]:
    return [m["role"] for m in body["messages"] if needle in (m.get("content") or "")]


def read(source: str, part: int | None = None, call_id: str | None = None) -> ToolCallSpec:
    args: dict[str, Any] = {"source": source}
    if part is not None:
        args["part"] = part
    return ToolCallSpec("read_source", args, id=call_id)


async def run_tool(tool: ReadSourceTool, source: str, part: int | None = None) -> ToolResult:
    ctx = ToolContext(session_id="s", turn_id="t", workspace=Path.cwd())
    return await tool.run(ReadSourceArgs(source=source, part=part), ctx)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    notebook = write_notebook(
        tmp_path / "a.ipynb",
        [
            ("markdown", "# Circles\nThe area of a circle."),
            ("code", "from math import pi\n\ndef area(r):\n    return pi * r**2"),
        ],
    )
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nThe area is $A = \\pi r^2$.\n", encoding="utf-8")
    transcript = tmp_path / "chat.md"
    transcript.write_text(
        f"## User: what is the area of a circle?\n\n{TRANSCRIPT_LINE}. The area is 2*pi*r.\n",
        encoding="utf-8",
    )
    return {"notebook": notebook, "notes": notes, "transcript": transcript}


# --- the pass ------------------------------------------------------------------------------------


async def test_explore_mounts_only_read_source_reads_files_and_returns_the_summary(
    server, model_for, files
):
    server.extend(
        [
            Reply(
                tool_calls=[
                    read("a.ipynb", call_id="c1"),
                    read("notes.md", call_id="c2"),
                    read("chat.md", call_id="c3"),
                ]
            ),
            Reply(text=SUMMARY),
        ]
    )
    emit = Recorder()
    attachments = [files["notebook"], files["notes"], files["transcript"]]
    summary = await explore(model_for(server), attachments, "What is the area of a circle?", emit)

    assert summary == SUMMARY
    first = server.requests[0].body
    assert tool_names(first) == ["read_source"]
    system = first["messages"][0]
    assert system["role"] == "system" and "investigator" in system["content"]
    for name in ("a.ipynb", "notes.md", "chat.md"):
        assert f"- {name} (" in system["content"]
    assert "1 part)" in system["content"]
    assert "What is the area of a circle?" in first["messages"][1]["content"]

    # The tool results carry the files' text: a notebook cell's source, the markdown file.
    tool_messages = {
        m["tool_call_id"]: m["content"]
        for m in server.requests[1].body["messages"]
        if m["role"] == "tool"
    }
    assert "def area(r):\n    return pi * r**2" in tool_messages["c1"]
    assert "[cell 1, code" in tool_messages["c1"]
    assert "The area is $A = \\pi r^2$." in tool_messages["c2"]
    assert "[line 1]\n# Notes" in tool_messages["c2"]
    assert TRANSCRIPT_LINE in tool_messages["c3"]  # a heading-only section is read, too
    assert "part 1 of 1" in tool_messages["c2"]

    # The transcript's assistant line travels only as a tool result, never as a prompt.
    for request in server.requests:
        assert set(messages_with(request.body, TRANSCRIPT_LINE)) <= {"tool"}
    assert messages_with(server.requests[1].body, TRANSCRIPT_LINE) == ["tool"]

    # Every event is tagged for the "Reading attachments" card, framed by start/end notices.
    assert all(data.get("explore") is True for _, data in emit.events)
    notices = [data for kind, data in emit.events if kind == "notice"]
    assert notices[0]["stage"] == "start" and notices[-1]["stage"] == "end"
    assert notices[-1]["status"] == "done" and notices[-1]["reads"] == 3
    assert [a["name"] for a in notices[0]["attachments"]] == ["a.ipynb", "notes.md", "chat.md"]
    kinds = {kind for kind, _ in emit.events}
    assert {"tool_call", "tool_result", "content", "round_started"} <= kinds


async def test_the_answer_loop_sees_the_summary_and_question_but_not_the_transcript(
    server, model_for, files
):
    question = "Is the area 2*pi*r?"
    server.extend(
        [Reply(tool_calls=[read("chat.md")]), Reply(text=SUMMARY), Reply(text="No: it is pi r^2.")]
    )
    model = model_for(server)
    summary = await explore(model, [files["transcript"]], question, Recorder())

    seed = seed_message(summary, question)
    assert seed.startswith("Notes from reading the learner's attachments (objective summary):\n")
    assert SUMMARY in seed and seed.endswith(f"\n\nThe learner's question: {question}")
    assert TRANSCRIPT_LINE not in seed

    # The answer loop: a normal turn whose question is the seed; it has no read_source.
    profile = ModelProfile(provider="custom", model="fake-model")
    ctx = TurnContext(session_id="s", turn_id="t", question=seed, profile=profile)
    orch = Orchestrator(None)
    turn = orch.start_turn(ctx, model, EventLog("t"))
    assert turn.task is not None
    await turn.task
    assert turn.status == "done" and turn.answer == "No: it is pi r^2."
    answer_request = server.requests[-1].body
    assert "read_source" not in tool_names(answer_request)
    assert messages_with(answer_request, TRANSCRIPT_LINE) == []
    assert answer_request["messages"][-1] == {"role": "user", "content": seed}


async def test_a_model_that_answers_without_reading_is_nudged_once(server, model_for, files):
    server.extend(
        [
            Reply(text="The notes probably discuss circles."),
            Reply(tool_calls=[read("notes.md")]),
            Reply(text="The notes give A = pi r^2."),
        ]
    )
    emit = Recorder()
    summary = await explore(model_for(server), [files["notes"]], "Area?", emit)

    assert summary == "The notes give A = pi r^2."
    assert len(server.requests) == 3
    nudged = server.requests[1].body["messages"]
    assert nudged[-1] == {"role": "user", "content": READ_NUDGE}
    assert nudged[-2] == {"role": "assistant", "content": "The notes probably discuss circles."}
    assert tool_names(server.requests[1].body) == ["read_source"]
    later = [m for m in server.requests[2].body["messages"] if m["content"] == READ_NUDGE]
    assert len(later) == 1
    assert [d.get("stage") for k, d in emit.events if k == "notice"] == ["start", "nudge", "end"]


async def test_the_nudge_is_given_only_once(server, model_for, files):
    server.extend([Reply(text="Guess one."), Reply(text="Guess two.")])
    summary = await explore(model_for(server), [files["notes"]], "Area?", Recorder())
    assert summary == "Guess two."
    assert len(server.requests) == 2 and server.pending == 0


async def test_no_nudge_after_a_read(server, model_for, files):
    server.extend([Reply(tool_calls=[read("notes.md")]), Reply(text="Notes read.")])
    assert await explore(model_for(server), [files["notes"]], "Area?", Recorder()) == "Notes read."
    assert len(server.requests) == 2


async def test_missing_and_unreadable_attachments_are_reported_not_raised(
    server, model_for, tmp_path, files
):
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{not json", encoding="utf-8")
    missing = tmp_path / "gone.pdf"
    server.extend(
        [
            Reply(tool_calls=[read("gone.pdf", call_id="g"), read("broken.ipynb", call_id="b")]),
            Reply(tool_calls=[read("notes.md")]),
            Reply(text="gone.pdf was not found; broken.ipynb is not a valid notebook."),
        ]
    )
    summary = await explore(
        model_for(server), [missing, broken, files["notes"]], "What is in these?", Recorder()
    )
    assert "not found" in summary
    system = server.requests[0].body["messages"][0]["content"]
    assert "- gone.pdf: cannot be read (file not found)" in system
    assert "- broken.ipynb: cannot be read (" in system and "not a valid notebook" in system
    results = {
        m["tool_call_id"]: m["content"]
        for m in server.requests[1].body["messages"]
        if m["role"] == "tool"
    }
    assert results["g"] == "gone.pdf cannot be read: file not found"
    assert results["b"].startswith("broken.ipynb cannot be read: ")


async def test_no_nudge_when_nothing_can_be_read(server, model_for, tmp_path):
    server.extend([Reply(text="The only attachment, gone.md, could not be found.")])
    summary = await explore(model_for(server), [tmp_path / "gone.md"], "?", Recorder())
    assert "could not be found" in summary and len(server.requests) == 1


async def test_no_attachments_sends_nothing(server, model_for):
    emit = Recorder()
    assert await explore(model_for(server), [], "?", emit) == ""
    assert server.requests == [] and emit.events == []


async def test_a_provider_error_closes_the_card_and_propagates(server, model_for, files):
    from deeptutor_jupyter.providers.base import ProviderError

    server.add(Reply(status=401, error="bad key"))
    emit = Recorder()
    with pytest.raises(ProviderError):
        await explore(model_for(server), [files["notes"]], "?", emit)
    last = [d for k, d in emit.events if k == "notice"][-1]
    assert last["stage"] == "end" and last["status"] == "error" and last["explore"] is True


# --- read_source ----------------------------------------------------------------------------------


async def test_read_source_refuses_anything_that_is_not_an_attachment(tmp_path, files):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET", encoding="utf-8")
    sub = tmp_path / "docs"
    sub.mkdir()
    inner = sub / "lesson.md"
    inner.write_text("# Lesson\n\nText.", encoding="utf-8")
    tool = ReadSourceTool([inner])
    tool.load()
    for source in (
        str(secret),
        "secret.txt",
        "../secret.txt",
        "lesson.md/../../secret.txt",
        str(inner.parent / ".." / "secret.txt"),
        "notes.md",
    ):
        result = await run_tool(tool, source)
        assert result.is_error, source
        assert "not one of the learner's attachments" in result.content
        assert "Attachments: lesson.md." in result.content
        assert "TOP SECRET" not in result.content
    ok = await run_tool(tool, "lesson.md")
    assert not ok.is_error and "Text." in ok.content


async def test_read_source_pages_a_long_file(tmp_path):
    paragraphs = [f"Paragraph {n}: " + "word " * 150 for n in range(60)]
    long = tmp_path / "long.txt"
    long.write_text("\n\n".join(paragraphs), encoding="utf-8")
    tool = ReadSourceTool([long])
    [info] = tool.load()
    count = len(info.parts)
    assert count >= 3

    seen = ""
    for number in range(1, count + 1):
        result = await run_tool(tool, "long.txt", number)
        assert not result.is_error
        assert len(result.content) <= PART_CHARS
        assert result.content.startswith(f"long.txt — part {number} of {count}\n")
        assert result.data == {"source": "long.txt", "part": number, "parts": count}
        if number < count:
            assert f'read_source(source="long.txt", part={number + 1})' in result.content
        else:
            assert result.content.endswith("[End of long.txt.]")
        seen += result.content
    for n in range(60):
        assert f"Paragraph {n}: " in seen

    first = await run_tool(tool, "long.txt")
    assert first.content.startswith(f"long.txt — part 1 of {count}")
    for bad in (0, count + 1):
        result = await run_tool(tool, "long.txt", bad)
        assert result.is_error and f"numbered 1 to {count}" in result.content


async def test_read_source_reads_pdf_pages_and_plain_text_of_other_types(tmp_path):
    pdf = write_pdf(tmp_path / "slides.pdf", ["Euler identity", "Second page"])
    data = tmp_path / "log.json"
    data.write_text(json.dumps({"messages": ["hello"]}), encoding="utf-8")
    blob = tmp_path / "image.bin"
    blob.write_bytes(b"\x89PNG\x00\x01\xff")
    tool = ReadSourceTool([pdf, data, blob])
    infos = {info.name: info for info in tool.load()}
    text = (await run_tool(tool, "slides.pdf")).content
    assert "[page 1]\nEuler identity" in text and "[page 2]\nSecond page" in text
    assert '"messages"' in (await run_tool(tool, "log.json")).content
    assert (
        infos["image.bin"].error is not None and "unsupported file type" in infos["image.bin"].error
    )
    assert (await run_tool(tool, "image.bin")).is_error


def test_clashing_file_names_get_distinct_labels(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one, two = tmp_path / "a" / "notes.md", tmp_path / "b" / "notes.md"
    tool = ReadSourceTool([one, two, one])
    assert list(tool.attachments) == [one.as_posix(), two.as_posix()]


def test_seed_message_without_notes():
    assert seed_message("  ", "Why?") == (
        "Notes from reading the learner's attachments (objective summary):\n"
        "[The reading pass produced no notes.]\n\nThe learner's question: Why?"
    )
