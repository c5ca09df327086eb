"""The answer streams as Markdown blocks cut at safe boundaries; finished views let go."""

from __future__ import annotations

import itertools
import json
import time

import ipywidgets as widgets
from ipywidgets.widgets import widget as widget_module

from deeptutor_jupyter.kernel.widgets.turn_view import FLUSH_INTERVAL, TurnView, _TextBlock

FENCE = "```python\nx = 1\n\ny = 2\n```\n\n"
MATH = "$$\na = b\n\nc = d\n$$\n\n"


def long_answer() -> str:
    parts = []
    for i in range(40):
        parts.append(f"Paragraph {i} says something useful about eigenvectors.\n\n")
        parts.append(FENCE if i % 2 else MATH)
    return "".join(parts) + "End."


def shown(block: _TextBlock) -> list[str]:
    return [str(o.outputs[0]["data"]["text/markdown"]) for o in block.blocks()]


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


def stream(answer: str, chars_per_second: float) -> tuple[_TextBlock, list[float], list[int]]:
    """Feed ``answer`` in 4-character tokens on an injected clock, flushing as TurnView does
    (FLUSH_INTERVAL after the first unsent token); return the block, when a send made text
    visible, and each send's length."""
    block, clock = _TextBlock(), [0.0]
    shown_at: list[float] = []
    sizes: list[int] = []
    send = block._send

    def spy(text: str) -> None:
        if len(text) != block._sent:
            shown_at.append(clock[0])
            sizes.append(len(text))
        send(text)

    block._send = spy  # type: ignore[method-assign]
    due: float | None = None
    for i in range(0, len(answer), 4):
        clock[0] += 4 / chars_per_second
        block.parts.append(answer[i : i + 4])
        if due is None:
            due = clock[0] + FLUSH_INTERVAL
        elif clock[0] >= due:
            block.sync(final=False, now=clock[0])
            due = None
    block.sync(final=True, now=clock[0])
    return block, shown_at, sizes


def test_streaming_text_is_shown_at_least_every_second_for_few_bytes() -> None:
    """Issue 28: the growing block was resent only at 4x growth, so a long block left the
    view unchanged for seconds (10 s under load). Text that arrived is now shown within
    MAX_GAP: at the due time the block is cut at its last safe boundary (the finished part is
    sent once), or resent if it has none yet. A fast answer still costs little more than
    its own length."""
    answer = "".join(
        f"Paragraph {i} explains why eigenvectors keep their direction under the map. " * 3
        + "\n\n"
        + (FENCE if i % 3 == 0 else "")
        for i in range(250)
    )
    for rate in (200.0, 2000.0):  # characters a second: a slow model, a fast one
        block, shown_at, sizes = stream(answer, rate)
        assert "".join(shown(block)) == answer
        assert shown_at[0] <= FLUSH_INTERVAL + 8 / rate  # the first words at once
        gaps = [b - a for a, b in itertools.pairwise(shown_at)]
        assert max(gaps) <= 1.0, (rate, max(gaps))
        if rate == 2000.0:
            assert sum(sizes) < 1.6 * len(answer), sum(sizes) / len(answer)
            assert len(block.blocks()) < 40  # blocks, not a widget per paragraph


async def test_a_finished_view_closes_what_it_no_longer_shows() -> None:
    before = len(widget_module._instances)
    view = TurnView(model_label="custom/fake")
    stop = view.stop_button
    view.handle(_event("content", 1, text="The answer."))
    # Each model opens with its whole state (a Layout ~1.7 kB): the view's plain parts share
    # one Layout, and the thinking card and the notes box are never made for a plain answer.
    opened = list(widget_module._instances.values())[before:]
    names = sorted(type(w).__name__ for w in opened)
    assert names.count("LeanLayout") == 2 and len(opened) <= 9, names
    # And a Layout opens with the properties set, not ~40 nulls (1.2 kB of its 1.7 kB open).
    layout = view._text_layout.get_state()
    assert layout["width"] == "auto" and [k for k, v in layout.items() if v is None] == [
        "_view_count"
    ]
    assert len(json.dumps(view._plain.get_state())) < 400
    assert view._plain.get_state("width") == {"width": None}  # updates unchanged
    assert view.thinking is None and view.errors is None
    view.handle(_event("done", 2, status="done"))
    assert stop.comm is None  # closed
    assert stop not in view.children and view.layout.comm is not None  # the shared one stays
    assert view.answer_text == "The answer."
    assert isinstance(view.status, widgets.HTML) and "done" in view.status.value.lower()


async def test_text_before_a_pause_is_shown_without_another_event() -> None:
    """The first words show at once; words that came right after them, before the model
    paused (writing a tool call, a slow model), waited for an event that never came: the
    view now shows them when they are due."""
    import asyncio

    view = TurnView(model_label="custom/fake")
    view.handle(_event("content", 1, text="First words. "))
    await asyncio.sleep(FLUSH_INTERVAL + 0.1)
    assert "".join(shown(view._text)) == "First words. "  # type: ignore[arg-type]
    view.handle(_event("content", 2, text="And then more, just before the pause."))
    whole = "First words. And then more, just before the pause."
    deadline = time.monotonic() + 5
    while "".join(shown(view._text)) != whole:  # type: ignore[arg-type]
        assert time.monotonic() < deadline, shown(view._text)  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
    view.handle(_event("done", 3, status="done"))


def _event(kind: str, seq: int, **data: object):  # type: ignore[no-untyped-def]
    from deeptutor_jupyter.runtime.events import Event

    return Event.from_row(kind, seq, "turn-1", dict(data), time.time())
