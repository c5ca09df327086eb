"""``%tutor book`` (issue 26) against the fake model and a small knowledge base: every code cell
runs, every exercise's hidden tests pass with the reference and fail with the starter, citations
resolve; a build stopped mid-way resumes without asking again for what it has; a rebuild after
one source changed rewrites only that chapter and keeps the learner's work; hints mode ships no
solution."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.book import BuildState, build_book, open_state
from deeptutor_jupyter.book.stages import BookError
from deeptutor_jupyter.config import resolve_settings
from deeptutor_jupyter.knowledge import KnowledgeBase
from deeptutor_jupyter.learning.sandbox import Sandbox, isolation_available
from deeptutor_jupyter.providers import model_from_settings
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.runtime.fake_model_env import use_fake_model

pytestmark = pytest.mark.skipif(
    not isolation_available(), reason="the book's examples need the sandbox"
)

DOT = "def dot(a, b):\n    return sum(x * y for x, y in zip(a, b))\n"
IDENTITY = "def identity(n):\n    return [[int(i == j) for j in range(n)] for i in range(n)]\n"


def reply(value: dict[str, Any], **kwargs: Any) -> Reply:
    return Reply(text=f"```json\n{json.dumps(value)}\n```", **kwargs)


OUTLINE = reply(
    {
        "chapters": [
            {"title": "Vectors", "objective": "compute a dot product", "query": "vector dot"},
            {"title": "Matrices", "objective": "build an identity", "query": "matrix identity"},
        ]
    }
)
VECTORS = reply(
    {
        "blocks": [
            {
                "kind": "text",
                "markdown": "A vector has a direction [1]; also [7]. `v[0]` is first.",
            },
            {"kind": "example", "markdown": "A dot product.", "code": "print(1 * 3 + 2 * 4)"},
            {"kind": "example", "markdown": "Broken at first.", "code": "print(undefined_name)"},
            {
                "kind": "exercise",
                "markdown": "Write `dot(a, b)`.",
                "code": "def dot(a, b):\n    pass\n",
                "reference_solution": DOT,
                "tests": "assert dot([1, 2], [3, 4]) == 11\n",
                "evaluation_criteria": ["uses zip"],
            },
            {  # its starter already passes: not an exercise, dropped
                "kind": "exercise",
                "markdown": "Again.",
                "code": DOT,
                "reference_solution": DOT,
                "tests": "assert dot([1], [2]) == 2\n",
            },
            {  # its reference fails its own tests: dropped
                "kind": "exercise",
                "markdown": "Halve it.",
                "code": "def half(x):\n    pass\n",
                "reference_solution": "def half(x):\n    return x\n",
                "tests": "assert half(4) == 2\n",
            },
            {"kind": "quiz", "markdown": "dot products"},
        ]
    }
)


def matrices(word: str = "maps") -> Reply:
    return reply(
        {
            "blocks": [
                {"kind": "text", "markdown": f"A matrix {word} columns [1]."},
                {"kind": "example", "markdown": "Never runs.", "code": "raise ValueError('no')"},
                {
                    "kind": "exercise",
                    "markdown": "Write `identity(n)`.",
                    "code": "def identity(n):\n    return []\n",
                    "reference_solution": IDENTITY,
                    "tests": "assert identity(2) == [[1, 0], [0, 1]]\n",
                },
            ]
        }
    )


REPAIRED = reply({"code": "print(2 + 2)"})
NOT_REPAIRED = reply({"code": "raise ValueError('still')"})
FULL = [OUTLINE, VECTORS, matrices(), REPAIRED, NOT_REPAIRED]


@pytest.fixture
def course(tmp_path: Path) -> Path:
    folder = tmp_path / "course"
    folder.mkdir()
    (folder / "vectors.md").write_text("# Vectors\n\nA vector has a direction. The dot product.\n")
    (folder / "matrices.md").write_text("# Matrices\n\nA matrix has an identity.\n")
    KnowledgeBase(tmp_path / "home", "course").add_sources([folder])
    return folder


@pytest.fixture
async def fake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, course: Path
) -> AsyncIterator[tuple[FakeLLMServer, Any]]:
    with FakeLLMServer() as server:
        use_fake_model(monkeypatch, tmp_path / "home", server.url)
        model = model_from_settings(resolve_settings().settings)
        yield server, model
        await model.aclose()


def wanted(tmp_path: Path, **kwargs: Any) -> BuildState:
    notebook = str(tmp_path / "linear-algebra.ipynb")
    return BuildState(topic="Linear algebra", kbs=["course"], notebook=notebook, **kwargs)


def cells_of(tmp_path: Path) -> list[dict[str, Any]]:
    return json.loads((tmp_path / "linear-algebra.ipynb").read_text())["cells"]


def meta(cell: dict[str, Any]) -> dict[str, Any]:
    return cell["metadata"].get("deeptutor", {})


async def test_a_book_runs_checks_its_exercises_and_cites_its_sources(
    tmp_path: Path, fake: tuple[FakeLLMServer, Any]
) -> None:
    server, model = fake
    server.extend(FULL)
    stages: list[str] = []
    report = await build_book(
        tmp_path / "home", wanted(tmp_path), model, progress=lambda s, _w: stages.append(s)
    )
    assert list(dict.fromkeys(stages)) == ["ideation", "sources", "spine", "pages", "compile"]
    cells = cells_of(tmp_path)
    code = [c["source"] for c in cells if c["cell_type"] == "code"]
    sandbox = Sandbox()
    runnable = [s for s in code if not s.startswith("%tutor")]
    assert runnable and (await sandbox.run("\n".join(runnable), "")).passed  # every cell runs
    assert "print(2 + 2)" in code and "raise ValueError" not in "".join(code)  # repaired, dropped
    assert any(s.startswith("%tutor Quiz me on Vectors (objective `vectors`)") for s in code)
    title = next(c for c in cells if meta(c).get("block") == "ch1-title")
    assert meta(title)["objective_id"] == "vectors"  # the id a path on the topic gives it
    exercises = [c for c in cells if "exercise" in c["metadata"].get("tags", [])]
    assert len(exercises) == 2  # the one whose starter passed and the broken one were dropped
    assert any("the reference fails its tests" in n for n in report.notes)
    for cell in exercises:
        hidden = meta(cell)
        assert set(hidden) >= {"hidden_tests", "reference_solution", "evaluation_criteria"}
        assert hidden["hidden_tests"] not in cell["source"]
        assert (await sandbox.run(hidden["reference_solution"], hidden["hidden_tests"])).passed
        assert not (await sandbox.run(cell["source"], hidden["hidden_tests"])).passed
    for chapter in ("ch1", "ch2"):
        mine = [c["source"] for c in cells if meta(c).get("chapter") == chapter]
        (listed,) = [s for s in mine if s.startswith("**Sources**")]
        prose = [re.sub(r"`[^`]*`", "", s) for s in mine]  # `v[0]` is code, not a citation
        cited = {n for s in prose for n in re.findall(r"\[(\d+)\]", s)}
        assert cited and all(f"[{n}] `" in listed for n in cited), (cited, listed)
    text = next(c["source"] for c in cells if "A vector has a direction" in c["source"])
    assert "[7]" not in text and "`v[0]`" in text  # an unknown citation goes, code stays
    assert any("vectors.md" in c["source"] for c in cells if meta(c).get("chapter") == "ch1")
    assert any("citation [7] removed" in n for n in report.notes)
    assert len(server.requests) == len(FULL)


async def test_hints_mode_ships_no_solution(tmp_path: Path, fake: tuple[FakeLLMServer, Any]):
    server, model = fake
    server.extend(FULL)
    await build_book(tmp_path / "home", wanted(tmp_path), model)
    path = tmp_path / "linear-algebra.ipynb"
    nb = json.loads(path.read_text())
    started = next(c for c in nb["cells"] if "exercise" in c["metadata"].get("tags", []))
    started["source"] += "    # my attempt\n"  # the learner's cell: kept by the rebuild
    path.write_text(json.dumps(nb))
    # The instructor switches the course to hints: the next build holds no solution at all.
    server.extend(FULL)
    await build_book(
        tmp_path / "home", open_state(tmp_path / "home", wanted(tmp_path, hints=True)), model
    )
    text = json.dumps(cells_of(tmp_path))
    assert "# my attempt" in text
    assert "reference_solution" not in text and "hidden_tests" in text
    assert "sum(x * y" not in text and "int(i == j)" not in text


async def until(predicate: Callable[[], bool], timeout: float = 20) -> None:
    async def wait() -> None:
        while not predicate():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(wait(), timeout)


async def test_a_stopped_build_resumes_without_asking_again(
    tmp_path: Path, fake: tuple[FakeLLMServer, Any]
) -> None:
    server, model = fake
    home = tmp_path / "home"
    slow = matrices()
    server.extend([OUTLINE, VECTORS, Reply(text=slow.text, delay=30)])
    task = asyncio.create_task(build_book(home, wanted(tmp_path), model))
    await until(lambda: len(server.requests) == 3)  # chapter 2 is being written: stop
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not (tmp_path / "linear-algebra.ipynb").exists()
    saved = open_state(home, wanted(tmp_path))
    assert saved.chapters["ch1"].written and not saved.chapters["ch2"].written
    server.clear_requests()
    server.extend([matrices(), REPAIRED, NOT_REPAIRED])
    report = await build_book(home, saved, model)
    prompts = [r.body["messages"][0]["content"] for r in server.requests]
    assert len(prompts) == 3 and prompts[0].startswith("Write chapter 2")
    assert report.written == ["Matrices"]
    assert len([c for c in cells_of(tmp_path) if meta(c).get("block") == "ch1-title"]) == 1


async def test_a_rebuild_rewrites_only_the_changed_chapter_and_keeps_the_learners_work(
    tmp_path: Path, fake: tuple[FakeLLMServer, Any], course: Path
) -> None:
    server, model = fake
    home = tmp_path / "home"
    server.extend(FULL)
    await build_book(home, wanted(tmp_path), model)
    path = tmp_path / "linear-algebra.ipynb"
    nb = json.loads(path.read_text())
    ch1 = [c for c in nb["cells"] if meta(c).get("chapter") == "ch1"]
    starter = next(c for c in ch1 if "exercise" in c["metadata"].get("tags", []))
    starter["source"] = "def dot(a, b):\n    return 11  # my attempt\n"
    mine = {"cell_type": "markdown", "id": "mine", "metadata": {}, "source": "My notes."}
    nb["cells"].insert(nb["cells"].index(ch1[-1]) + 1, mine)
    path.write_text(json.dumps(nb))
    before = [c for c in nb["cells"] if meta(c).get("chapter") == "ch1" or c is mine]
    (course / "matrices.md").write_text("# Matrices\n\nA matrix has an identity and a trace.\n")
    server.clear_requests()
    server.extend([matrices("stretches"), NOT_REPAIRED])
    report = await build_book(home, open_state(home, wanted(tmp_path)), model)
    prompts = [r.body["messages"][0]["content"] for r in server.requests]
    assert len(prompts) == 2 and prompts[0].startswith("Write chapter 2") and "trace" in prompts[0]
    assert report.written == ["Matrices"] and report.kept == ["Vectors"]
    after = cells_of(tmp_path)
    assert [c for c in after if meta(c).get("chapter") == "ch1" or c["id"] == "mine"] == before
    sources = "".join(c["source"] for c in after)
    assert "A matrix stretches columns" in sources and "A matrix maps" not in sources


async def test_a_notebook_of_the_same_name_that_is_not_the_book_is_left_alone(
    tmp_path: Path, fake: tuple[FakeLLMServer, Any]
) -> None:
    server, model = fake
    mine = tmp_path / "linear-algebra.ipynb"
    mine.write_text(json.dumps({"cells": [{"cell_type": "markdown", "metadata": {},
                                           "source": "my own notes"}], "metadata": {},
                                "nbformat": 4, "nbformat_minor": 5}))  # fmt: skip
    before = mine.read_bytes()
    server.extend(FULL)
    with pytest.raises(BookError, match="already exists and is not this book"):
        await build_book(tmp_path / "home", wanted(tmp_path), model)
    assert mine.read_bytes() == before


async def test_an_unusable_reply_stops_the_build_and_keeps_the_state(
    tmp_path: Path, fake: tuple[FakeLLMServer, Any]
) -> None:
    server, model = fake
    server.extend([OUTLINE, Reply(text="Sorry, I cannot.")])
    with pytest.raises(BookError, match="run the same command again to resume"):
        await build_book(tmp_path / "home", wanted(tmp_path), model)
    assert open_state(tmp_path / "home", wanted(tmp_path)).outline


async def test_an_exercise_is_graded_with_its_hidden_tests_when_the_learner_asks(
    tmp_path: Path, fake: tuple[FakeLLMServer, Any]
) -> None:
    from deeptutor_jupyter.book.grading import CheckExerciseArgs, CheckExerciseTool
    from deeptutor_jupyter.tools.base import ToolContext

    server, model = fake
    server.extend(FULL)
    await build_book(tmp_path / "home", wanted(tmp_path), model)
    path = tmp_path / "linear-algebra.ipynb"
    tool = CheckExerciseTool(lambda: path)
    ctx = ToolContext("s", "t", tmp_path)
    first = await tool.run(CheckExerciseArgs(), ctx)
    assert first.summary == "Passed: 0 of 2 exercises (the saved notebook)"
    nb = json.loads(path.read_text())
    index = next(i for i, c in enumerate(nb["cells"]) if "def dot" in c["source"])
    nb["cells"][index]["source"] = DOT  # the learner's answer, saved
    path.write_text(json.dumps(nb))
    mine = await tool.run(CheckExerciseArgs(cell=index), ctx)
    assert mine.summary == "Passed: 1 of 1 exercise (the saved notebook)"
    assert "sum(x * y" not in first.content  # the reference is never shown


class OpenIn:
    """What kernel/cells_comm.py's LabFrontend says of the book's notebook."""

    def __init__(self, is_open: bool) -> None:
        self.open, self.asked = is_open, 0

    async def is_open(self) -> bool:
        self.asked += 1
        return self.open


async def test_a_rebuild_writes_nothing_under_a_notebook_open_in_jupyterlab(
    tmp_path: Path, fake: tuple[FakeLLMServer, Any], course: Path
) -> None:
    server, model = fake
    home, path = tmp_path / "home", tmp_path / "linear-algebra.ipynb"
    first = OpenIn(True)
    server.extend(FULL)
    await build_book(home, wanted(tmp_path), model, frontend=first)
    assert first.asked == 0 and path.exists()  # a new notebook is open nowhere
    before = path.read_bytes()
    (course / "matrices.md").write_text("# Matrices\n\nA matrix has an identity and a trace.\n")
    server.extend([matrices("stretches"), NOT_REPAIRED])
    with pytest.raises(BookError, match="is open in JupyterLab: close it"):
        await build_book(home, open_state(home, wanted(tmp_path)), model, frontend=first)
    assert path.read_bytes() == before
    server.clear_requests()
    await build_book(home, open_state(home, wanted(tmp_path)), model, frontend=OpenIn(False))
    assert server.requests == [] and "A matrix stretches" in path.read_text()  # only the write


async def test_a_book_from_this_conversation_cites_it(
    tmp_path: Path, fake: tuple[FakeLLMServer, Any]
) -> None:
    from deeptutor_jupyter.book import own_sources

    server, model = fake
    home = tmp_path / "home"
    said = [
        {"role": "user", "content": "What does an eigenvector do?"},
        {"role": "assistant", "content": "An eigenvector keeps its direction under the map."},
        {"role": "tool", "tool_call_id": "x", "content": "not part of the conversation"},
    ]
    name = own_sources(home, "Linear algebra", conversation=said)
    assert name == "book-linear-algebra"
    outline = reply({"chapters": [{"title": "Eigenvectors", "query": "eigenvector direction"}]})
    server.extend([outline, matrices(), NOT_REPAIRED])
    state = BuildState(topic="Linear algebra", kbs=[name], notebook=str(tmp_path / "b.ipynb"))
    await build_book(home, state, model)
    prompt = server.requests[1].body["messages"][0]["content"]
    assert "keeps its direction" in prompt and "not part of" not in prompt
    notebook = (tmp_path / "b.ipynb").read_text()
    assert "linear-algebra-conversation.md" in notebook  # the Sources cell names it
    assert own_sources(home, "Linear algebra", conversation=[]) is None


async def test_a_book_whose_own_sources_are_empty_is_built_from_the_rest(
    tmp_path: Path, fake: tuple[FakeLLMServer, Any]
) -> None:
    server, model = fake
    server.extend(FULL)
    state = wanted(tmp_path)
    state.kbs.append("book-linear-algebra")  # --from conversation, with nothing said yet
    await build_book(tmp_path / "home", state, model)
    assert "vectors.md" in (tmp_path / "linear-algebra.ipynb").read_text()
