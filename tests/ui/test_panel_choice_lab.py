"""The Tutor panel's model and knowledge-base chooser and its Progress tab, in real JupyterLab and
Debian's Chromium (one JupyterLab, one notebook and kernel: the steps share them, as a learner's
session does): the mastery view is honest before any quiz; a model and a knowledge base picked in
the panel serve the next turns' requests and show in the turn's trace line; after a graded quiz
the mastery view shows the objective, typeset."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.knowledge.base import KnowledgeBase
from deeptutor_jupyter.learning.path import LearningPath
from deeptutor_jupyter.store.learning import LearningStore
from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.ui.test_lab import (
    ARTIFACTS,
    lab_page,
    lab_server,
    needs_chromium,
    open_notebook,
    write_notebook,
)
from tests.ui.test_sidebar import open_tutor

pytestmark = pytest.mark.ui

QUIZ = {
    "title": "Squares",
    "objective": "squares",
    "questions": [
        {
            "id": "q1",
            "kind": "choice",
            "prompt": "Which is $2^2$?",
            "options": [{"id": "a", "label": "two"}, {"id": "b", "label": "four"}],
            "answer": ["b"],
        }
    ],
}


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("choice-lab")
    home = folder / "home"
    home.mkdir(mode=0o700)
    # What the learner configured: one more model of the same provider (docs/configuration.md).
    settings = home / "settings.toml"
    settings.write_text('models = ["fake-big"]\n', encoding="utf-8")
    os.chmod(settings, 0o600)
    notes = folder / "notes.md"
    notes.write_text("# Rank\n\nThe rank of a matrix counts its pivots.\n", encoding="utf-8")
    KnowledgeBase(home, "linalg").add_sources([notes])
    return folder


@pytest.fixture(scope="module")
def shared_lab(root: Path, llm: FakeLLMServer) -> Iterator[str]:
    with lab_server(root, llm) as url:
        yield url


def pick(page: Any, select: str, value: str) -> None:
    """Choose in one of the chooser's lists, and wait until the kernel confirmed it (the list
    shows what the kernel sent back, not what was clicked)."""
    page.locator(select).select_option(value)
    page.wait_for_function(
        "([s, v]) => document.querySelector(s)?.value === v", arg=[select, value]
    )


@needs_chromium
def test_a_model_and_knowledge_base_picked_serve_the_next_turn_and_progress_shows_the_quiz(
    shared_lab: str, llm: FakeLLMServer, root: Path
) -> None:
    llm.extend(
        [
            Reply(text="The rank counts the pivots [1]."),
            Reply(text="A quick check.", tool_calls=[ToolCallSpec("make_quiz", QUIZ, id="q_1")]),
            Reply(text="Well done on squares."),
        ]
    )
    write_notebook(root / "choice.ipynb", "x = 1")
    with lab_page("panel-progress") as page:
        open_notebook(page, shared_lab, "choice.ipynb")
        open_tutor(page)
        # Before any quiz: the Progress tab says there is nothing yet, and how to start.
        page.locator(".jp-DeepTutorPanel-tab", has_text="Progress").click()
        empty = page.locator(".jp-DeepTutorMastery .jp-DeepTutorPanel-empty")
        empty.wait_for()
        empty_text = empty.inner_text()
        page.screenshot(path=str(ARTIFACTS / "panel-progress-empty.png"))

        page.locator(".jp-DeepTutorPanel-tab", has_text="Chat").click()
        model = page.locator(".jp-DeepTutorChat-model")
        model.wait_for(timeout=60000)
        offered = model.locator("option").all_inner_texts()
        pick(page, ".jp-DeepTutorChat-model", "fake-big")
        pick(page, ".jp-DeepTutorChat-kb", "linalg")
        ask(page, "What is rank?")
        turn = page.locator(".jp-DeepTutorChat-turn[data-status='done']")
        turn.wait_for(timeout=60000)
        used = turn.locator(".jp-DeepTutorChat-used").inner_text()
        chosen_request = llm.requests[-1].body
        page.screenshot(path=str(ARTIFACTS / "panel-choice.png"))

        store = LearningStore(root / "home" / "state.db")
        path = LearningPath.model_validate(
            {
                "topic": "Powers",
                "objectives": [
                    {"id": "squares", "title": "Squares $x^2$ of **integers**"},
                    {"id": "cubes", "title": "Cubes $x^3$"},
                ],
            }
        )
        store.save_path("p-powers", path.topic, path.model_dump())
        store.close()
        ask(page, "Quiz me on squares.")
        card = page.locator("#deeptutor-panel .jp-DeepTutorQuiz")
        card.wait_for(timeout=60000)
        card.locator("label", has_text="four").click()
        card.locator("button", has_text="Submit answers").click()
        card.locator(".jp-DeepTutorQuiz-receipt").wait_for(timeout=60000)
        page.locator(".jp-DeepTutorChat-turn[data-status='done']").nth(1).wait_for(timeout=60000)

        page.locator(".jp-DeepTutorPanel-tab", has_text="Progress").click()
        squares = page.locator(".jp-DeepTutorMastery-objective", has_text="integers")
        squares.wait_for()
        squares.locator(".jp-DeepTutorMastery-title mjx-container").wait_for()  # typeset
        bold = squares.locator(".jp-DeepTutorMastery-title strong").inner_text()
        numbers = squares.locator(".jp-DeepTutorMastery-numbers").inner_text()
        topic = page.locator(".jp-DeepTutorMastery-topic").inner_text()
        cubes = page.locator(".jp-DeepTutorMastery-objective", has_text="Cubes").inner_text()
        inputs = page.locator(".jp-DeepTutorMastery input, .jp-DeepTutorMastery textarea").count()
    assert "No learning path yet." in empty_text and "%tutor learn <topic>" in empty_text
    assert offered == ["fake-model (configured)", "fake-big"]
    assert chosen_request["model"] == "fake-big"
    system = chosen_request["messages"][0]["content"]
    assert "Knowledge bases selected for this turn: linalg" in system
    assert used == "fake-big \u00b7 KB linalg"
    assert llm.requests[-1].body["model"] == "fake-big"  # the choice stays for the conversation
    assert topic == "Learning path: Powers"
    assert bold == "integers"
    assert "working on it" in numbers and "%" in numbers and "review" in numbers
    assert "later" in cubes and "\u2013" in cubes  # locked, no quiz yet
    assert inputs == 0  # read-only


def ask(page: Any, question: str) -> None:
    page.locator(".jp-DeepTutorChat-input textarea").fill(question)
    page.locator(".jp-DeepTutorChat-input button", has_text="Ask").click()
