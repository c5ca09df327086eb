"""One list of answers (labextension/src/answer_cases.json) that every surface's rule must agree
on: the coordinator's (interaction/answers.py), the cell card's Submit gate, and the panel's
(labextension/src/answercases.test.ts runs the same file through vitest). A rule changed on one
side only fails one of them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.interaction.answers import (
    ISO_DATE_PATTERN,
    NUMBER_PATTERN,
    InvalidAnswer,
    check_answer,
)

ROOT = Path(__file__).resolve().parents[2]
CASES: list[dict[str, Any]] = json.loads(
    (ROOT / "labextension" / "src" / "answer_cases.json").read_text(encoding="utf-8")
)["cases"]


def case_id(case: dict[str, Any]) -> str:
    return f"{case['mode']}-{case['input']!r}-{'ok' if case['ok'] else 'refused'}"


def test_the_cases_cover_both_outcomes_of_every_value_mode() -> None:
    seen = {(c["mode"], c["ok"]) for c in CASES}
    assert seen == {(m, ok) for m in ("text", "number", "date", "directory") for ok in (1, 0)}
    # The drifts this file was written for stay in it.
    for mode, text in [("number", "1_000"), ("number", "0x10"), ("date", "0099-12-31")]:
        assert any(c["mode"] == mode and c["input"] == text for c in CASES), text


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_coordinator_rule(case: dict[str, Any], tmp_path: Path) -> None:
    workspace = tmp_path / "notebooks"
    (workspace / "data" / "raw").mkdir(parents=True)
    body = {"mode": case["mode"], "options": [], "allow_custom": False}
    if case["ok"]:
        check_answer(body, [], case["input"], workspace)
    else:
        with pytest.raises(InvalidAnswer):
            check_answer(body, [], case["input"], workspace)


@pytest.mark.parametrize(
    "case", [c for c in CASES if c["mode"] in ("text", "number", "directory")], ids=case_id
)
def test_the_cards_submit_gate(case: dict[str, Any]) -> None:
    # The card's date is a DatePicker (it only ever holds a real day), and it leaves where a
    # folder is to the coordinator; a number or an empty field it judges itself, by the same rule.
    from deeptutor_jupyter.kernel.widgets.ask_user_card import AskUserCard

    sent: list[tuple[list[str], str, bool]] = []
    question = {
        "id": "ask_1",
        "tool_call_id": "call_1",
        "session_id": "s",
        "title": "?",
        "mode": case["mode"],
        "expires_at": 0,
    }
    card = AskUserCard(question, on_submit=lambda *a: sent.append(a))
    card.controls[case["mode"]].value = case["input"]
    card.submit_button.click()
    if case["mode"] == "directory" and not case["ok"] and case["input"].strip():
        assert len(sent) == 1  # sent; the coordinator refuses it and the card shows why
    else:
        assert bool(sent) == case["ok"], card.hint.value


def test_the_patterns_read_the_same_in_javascript() -> None:
    # The panel compiles these strings with RegExp (contracts.ts): only syntax both engines read
    # alike, no Python-only groups, flags or escapes.
    for pattern in (NUMBER_PATTERN, ISO_DATE_PATTERN):
        assert re.fullmatch(r"[\[\]\-+?:()|.*{}0-9a-zA-Z\\]+", pattern), pattern
        assert "(?P" not in pattern and "\\d" not in pattern and "\\A" not in pattern
