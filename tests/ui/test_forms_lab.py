"""Every ask_user form mode in real JupyterLab and Chromium: a screenshot of each (kept in
tests/ui/artifacts/form-<mode>.png), no element wider than the output area (no stray horizontal
scrollbar), and each answered the way a student would, Enter included. The setup card is
checked the same way, with no label cut off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec
from tests.ui.test_lab import ARTIFACTS, lab_page, needs_chromium, open_notebook, write_notebook

pytestmark = pytest.mark.ui

OPTIONS = [
    {"id": "notes", "label": "Read the notes", "description": "a short summary first"},
    {"id": "walk", "label": "Walkthrough", "description": "step by step", "recommended": True},
    {"id": "quiz", "label": "Quiz me", "description": "three quick questions to check"},
]
QUESTIONS: list[tuple[str, dict[str, Any]]] = [
    ("single", {"options": OPTIONS, "allowCustom": True}),
    ("multiple", {"options": OPTIONS}),
    ("toggle", {"options": OPTIONS}),
    ("text", {}),
    ("number", {}),
    ("date", {}),
    ("directory", {}),
]

# Everything inside the cell's output, and the output area itself, must fit its width.
OVERFLOW_JS = """(card) => {
  const area = card.closest('.jp-OutputArea-output');
  const limit = area.getBoundingClientRect().right + 0.5;
  const wide = [];
  for (const el of [area, ...area.querySelectorAll('*')]) {
    const box = el.getBoundingClientRect();
    if (box.width > 0 && box.right > limit) wide.push(`${el.className} right=${box.right}`);
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible')
      wide.push(`${el.className} scroll=${el.scrollWidth}>${el.clientWidth}`);
  }
  let up = area;
  while (up && !up.classList.contains('jp-Cell')) {
    if (up.scrollWidth > up.clientWidth + 1) wide.push(`${up.className} (ancestor)`);
    up = up.parentElement;
  }
  return wide;
}"""


def ask(mode: str, extra: dict[str, Any]) -> Reply:
    args = {"title": f"Question in {mode} mode", "description": "", "mode": mode, **extra}
    return Reply(tool_calls=[ToolCallSpec("ask_user", args, id=f"call_{mode}")])


def answers(server: FakeLLMServer) -> dict[str, dict[str, Any]]:
    found = {}
    for request in server.requests:
        for message in request.body["messages"]:
            if message.get("role") == "tool" and message["tool_call_id"].startswith("call_"):
                found[message["tool_call_id"][5:]] = json.loads(message["content"])
    return found


@needs_chromium
def test_each_form_mode_fits_and_answers(lab: str, fake_llm: FakeLLMServer, tmp_path: Path):
    (tmp_path / "data" / "raw").mkdir(parents=True)
    fake_llm.extend([ask(mode, extra) for mode, extra in QUESTIONS])
    fake_llm.add(Reply(text="All set, thank you."))
    setup_card = (
        "from deeptutor_jupyter.kernel.widgets.setup_card import SetupCard\n"
        "card = SetupCard(language='en')\ncard.provider.value = 'openai-compatible'\ncard"
    )
    write_notebook(
        tmp_path / "forms.ipynb", "%load_ext deeptutor_jupyter", "%tutor Plan my study", setup_card
    )
    with lab_page("forms") as page:
        open_notebook(page, lab, "forms.ipynb")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

        def open_card(mode: str) -> Any:
            title = page.locator(".dt-ask-title", has_text=f"Question in {mode} mode")
            title.wait_for()
            card = page.locator(".dt-ask-user").filter(has=title)
            card.locator(".dt-ask-submit").wait_for()
            return card

        def check(mode: str, card: Any, suffix: str = "") -> None:
            page.wait_for_timeout(300)  # let the frontend apply the last widget update
            card.screenshot(path=str(ARTIFACTS / f"form-{mode}{suffix}.png"))
            wide = card.evaluate(OVERFLOW_JS)
            assert wide == [], f"{mode}: {wide}"

        card = open_card("single")
        check("single", card)
        card.locator("label", has_text="Walkthrough").first.click()
        card.locator(".dt-ask-submit").click()

        card = open_card("multiple")
        check("multiple", card)
        card.locator("label", has_text="Quiz me").first.click()
        card.locator(".dt-ask-submit").click()

        card = open_card("toggle")
        card.locator("button", has_text="Read the notes").click()
        check("toggle", card, "-one-on")
        card.locator(".dt-ask-submit").click()

        card = open_card("text")
        check("text", card)
        field = card.locator("input[type=text]").first
        field.fill("about twenty minutes")
        field.press("Enter")  # a one-line answer submits on Enter

        card = open_card("number")
        field = card.locator("input[type=text]").first
        field.fill("a dozen")
        card.get_by_text("Type a number").wait_for()
        check("number", card, "-not-a-number")
        field.fill("12")
        page.wait_for_timeout(300)
        assert card.get_by_text("Type a number").count() == 0
        field.press("Enter")

        card = open_card("date")
        check("date", card)
        card.locator("input[type=date]").fill("2026-12-24")
        page.wait_for_timeout(300)
        card.locator(".dt-ask-submit").click()

        card = open_card("directory")
        field = card.locator("input").first
        field.fill("results")
        card.get_by_text("does not exist yet").wait_for()
        field.fill("data/raw")
        card.get_by_text("is an existing folder").wait_for()
        check("directory", card)
        field.press("Enter")

        # The turn has ended: every question and answer is in the static rendering.
        static = page.locator(".dt-static", has_text="All set, thank you.")
        static.wait_for()
        check("receipt", static)
        shown = static.inner_text()
        assert "Walkthrough" in shown and "2026-12-24" in shown and "data/raw" in shown

        # The setup card: no label cut off, every field within the output area.
        setup = page.locator(".dt-setup-card")
        setup.scroll_into_view_if_needed()
        cut = setup.evaluate(
            """(card) => [...card.querySelectorAll('.widget-label')]
                .filter((l) => l.scrollWidth > l.clientWidth + 1).map((l) => l.textContent)"""
        )
        assert cut == [], cut
        check("setup", setup)

    got = answers(fake_llm)
    assert got["single"]["selections"] == ["walk"]
    assert got["multiple"]["selections"] == ["quiz"]
    assert got["toggle"]["selections"] == ["notes"]
    assert got["text"]["customInput"] == "about twenty minutes"
    assert got["number"]["customInput"] == "12"
    assert got["date"]["customInput"] == "2026-12-24"
    assert got["directory"]["customInput"] == "data/raw"
