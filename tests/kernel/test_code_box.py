"""A quiz's code question is our anywidget code box (kernel/widgets/code_box.py), in process:
what the browser types arrives as the box's ``value`` and is the quiz's answer, the kernel's
value goes back to the browser, and anywidget is imported only when a code question is drawn."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from deeptutor_jupyter.kernel.widgets.code_box import CodeBox
from deeptutor_jupyter.kernel.widgets.quiz_card import QuizCard
from tests.learning.test_quiz_card_and_store import body

TYPED = "def f(x):\n    return 2 * x\n"


def from_the_browser(widget: Any, **state: Any) -> None:
    """An update message as the front end sends it over the widget's comm."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state}}})


def test_the_code_box_value_typed_in_the_browser_is_the_quiz_answer() -> None:
    sent: list[dict[str, Any]] = []
    card = QuizCard(body(), on_submit=lambda answers, seconds: sent.append(answers))
    _how, box, _ = card.controls["q4"]
    assert isinstance(box, CodeBox)
    state = box.get_state()
    assert state["value"].startswith("def f(x)")  # the starter, shown in the box
    assert "export default" in state["_esm"]  # the front-end module travels with the widget
    from_the_browser(box, value=TYPED)
    assert card.answers()["q4"] == TYPED
    card.controls["q1"][1].value = "b"
    card.controls["q2"][1].value = "3"
    card.controls["q3"][1].value = "x"
    card.submit_button.click()
    assert sent == [card.answers()] and sent[0]["q4"] == TYPED


def test_load_ext_and_a_quiz_without_code_leave_anywidget_unimported() -> None:
    probe = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "InteractiveShell.instance().run_line_magic('load_ext', 'deeptutor_jupyter')\n"
        "from deeptutor_jupyter.kernel.widgets.quiz_card import QuizCard\n"
        "from tests.learning.test_quiz_card_and_store import body\n"
        "quiz = body()\n"
        "quiz['questions'] = [q for q in quiz['questions'] if q['kind'] != 'code']\n"
        "QuizCard(quiz)\n"
        "print('anywidget' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr
