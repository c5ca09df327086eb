"""Every output a ``%tutor`` command displays reads well in a saved notebook without a kernel.

A saved notebook keeps ``text/plain`` and ``text/markdown`` next to each widget view; GitHub and
nbviewer show those. Here each command runs in a real kernel, and every display message it sent
(including the updates after a click) must carry words, never a widget's Python repr.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from deeptutor_jupyter.kernel.widgets.setup_card import SetupCard
from deeptutor_jupyter.testing import Reply, ToolCallSpec
from tests.e2e.kernel_driver import KernelDriver

pytestmark = pytest.mark.e2e

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
# What ipywidgets puts in text/plain by default: ``VBox(children=(IntProgress(…``
WIDGET_REPR = re.compile(r"^\s*[A-Z]\w*\((children|value|layout|description|outputs)=")


def displays(k: KernelDriver, since: int = 0) -> list[dict[str, Any]]:
    return [
        m["content"]["data"]
        for m in k.iopub[since:]
        if m["header"]["msg_type"] in ("display_data", "update_display_data")
    ]


def assert_readable(bundle: dict[str, Any]) -> str:
    text = str(bundle.get("text/markdown") or bundle.get("text/plain") or "")
    assert text.strip(), bundle
    for mime in ("text/plain", "text/markdown"):
        assert not WIDGET_REPR.match(str(bundle.get(mime, ""))), bundle
    return text


def run(k: KernelDriver, code: str) -> list[str]:
    """Run a cell; the readable text of each bundle it displayed, widgets first checked."""
    start = len(k.iopub)
    k.execute(code)
    k.pump(0.3)
    bundles = displays(k, start)
    assert bundles, f"{code!r} displayed nothing"
    return [assert_readable(b) for b in bundles]


def button(k: KernelDriver, root: str, description: str) -> str:
    return next(
        c
        for c in k.descendants(root)
        if k.widgets[c].get("_model_name") == "ButtonModel"
        and k.widgets[c].get("description") == description
    )


def test_every_command_output_has_a_readable_fallback(kernel: KernelDriver, fake_llm):
    texts = run(kernel, "%tutor memory")
    assert "Tutor memory" in texts[0] and "About you · 0 entries" in texts[0]
    assert "%tutor memory" in texts[0]

    texts = run(kernel, "%tutor memory forget --all")
    assert "nothing has been deleted" in texts[0]
    card = kernel.wait_for(lambda: kernel.with_class("dt-forget"))[0]
    start = len(kernel.iopub)
    kernel.click(button(kernel, card, "Cancel"))
    updated = kernel.wait_for(lambda: displays(kernel, start))
    assert "Cancelled: nothing was deleted." in assert_readable(updated[-1])

    start = len(kernel.iopub)
    run(kernel, "%tutor memory consolidate --mode merge")
    done = kernel.wait_for(
        lambda: [b for b in displays(kernel, start) if "applied in" in b.get("text/markdown", "")]
    )
    assert "0 changes applied in 1 pass" in assert_readable(done[-1])

    (empty_kbs,) = run(kernel, "%tutor kb list")
    assert empty_kbs.startswith("No knowledge bases yet. Add your course material with `%tutor")
    assert "```" not in empty_kbs and empty_kbs.count("`") == 4  # two clean code spans
    for code in ("%tutor config", "%tutor help", "%tutor why", "%tutor"):
        run(kernel, code)

    fake_llm.extend(
        [
            Reply(
                text="One question first.",
                tool_calls=[
                    ToolCallSpec("ask_user", {"title": "Your level?", "mode": "text"}, id="c1")
                ],
            )
        ]
    )
    turn = run(kernel, "%tutor Teach me sets")
    assert "Teach me sets" in turn[0]
    kernel.wait_for(lambda: kernel.with_class("dt-ask-user"))
    pending = run(kernel, "%tutor pending")
    assert any("Your level?" in text for text in pending)
    # Nothing the kernel displayed so far, widget updates included, was a bare repr.
    for bundle in displays(kernel):
        if WIDGET_MIME in bundle:
            assert_readable(bundle)


def test_the_setup_card_says_what_is_missing_and_how_to_set_up(tmp_path):
    from deeptutor_jupyter.config import resolve_settings

    resolved = resolve_settings(environ={"DEEPTUTOR_HOME": str(tmp_path)})
    card = SetupCard(resolved, environ={}, home=tmp_path)
    bundle = card._repr_mimebundle_()
    text = assert_readable(bundle)
    assert WIDGET_MIME in bundle
    assert "Connect DeepTutor to a model" in text and "Still needed:" in text
    assert "settings.toml" in text  # the steps to do it by hand
