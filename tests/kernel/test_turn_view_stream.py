"""The answer streams as Markdown blocks cut at safe boundaries; finished views let go."""

from __future__ import annotations

import time

import ipywidgets as widgets
from ipywidgets.widgets import widget as widget_module

from deeptutor_jupyter.kernel.widgets.turn_view import TurnView, _TextBlock

FENCE = "```python\nx = 1\n\ny = 2\n```\n\n"
MATH = "$$\na = b\n\nc = d\n$$\n\n"


def long_answer() -> str:
    parts = []
    for i in range(40):
        parts.append(f"Paragraph {i} says something useful about eigenvectors.\n\n")
        parts.append(FENCE if i % 2 else MATH)
    return "".join(parts) + "End."


def shown(block: _TextBlock) -> list[str]:
    return [str(o.outputs[0]["data"]["text/markdown"]) for o in block.widget.children]


def test_blocks_join_to_the_exact_answer_and_never_split_a_fence_or_math() -> None:
    answer = long_answer()
    block = _TextBlock()
    for i in range(0, len(answer), 7):
        block.parts.append(answer[i : i + 7])
        block.sync(final=False)
    block.sync(final=True)
    texts = shown(block)
    assert "".join(texts) == answer
    assert len(texts) > 1  # finished blocks are their own widgets, never resent
    for text in texts:
        assert text.count("```") % 2 == 0, text
        assert text.count("$$") % 2 == 0, text


def test_the_growing_block_is_resent_geometrically_not_on_every_flush() -> None:
    block = _TextBlock()
    sends: list[int] = []
    answer = "word " * 400  # one paragraph: a single block
    for i in range(0, len(answer), 5):
        block.parts.append(answer[i : i + 5])
        before = block._sent
        block.sync(final=False)
        if block._sent != before:
            sends.append(block._sent)
    block.sync(final=True)
    assert shown(block) == [answer]
    assert len(sends) < 10  # 400 flushes, a handful of sends
    assert sum(sends) < 2 * len(answer)


async def test_a_finished_view_closes_what_it_no_longer_shows() -> None:
    view = TurnView(model_label="custom/fake")
    stop, thinking = view.stop_button, view.thinking
    before = len(widget_module._instances)
    view.handle(_event("content", 1, text="The answer."))
    view.handle(_event("done", 2, status="done"))
    assert stop.comm is None and thinking.comm is None  # closed
    assert stop not in view.children and thinking not in view.children
    assert len(widget_module._instances) < before
    assert view.answer_text == "The answer."
    assert isinstance(view.status, widgets.HTML) and "done" in view.status.value.lower()


def _event(kind: str, seq: int, **data: object):  # type: ignore[no-untyped-def]
    from deeptutor_jupyter.runtime.events import Event

    return Event.from_row(kind, seq, "turn-1", dict(data), time.time())
