"""``preview`` then ``apply_preview``: Apply writes exactly the previewed text, with no second
model call, and refuses (writing nothing) when the document changed since."""

from __future__ import annotations

import pytest

from deeptutor_jupyter.memory import MemoryStore
from deeptutor_jupyter.memory.consolidate import apply_preview, preview
from deeptutor_jupyter.memory.store import StaleDocumentError
from deeptutor_jupyter.providers import ChatModel
from deeptutor_jupyter.testing import FakeLLMServer, Reply

from .conftest import make_record, ops_reply


async def test_a_two_chunk_preview_is_applied_byte_for_byte(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    for n in range(25):  # two chunks of traces: two model replies
        store.emit(make_record(f"t_{n}"))
    server.extend(
        [
            ops_reply({"op": "add", "section": "S", "text": "Likes examples", "refs": ["t_3"]}),
            ops_reply({"op": "add", "section": "T", "text": "Asks why", "refs": ["t_21"]}),
        ]
    )
    shown = await preview(store, model, layer="L2", key="chat", mode="update")
    assert store.read_text("L2", "chat") == ""
    assert "Likes examples" in shown.after and "Asks why" in shown.after
    assert shown.marks_seen() and len(shown.unseen) == 25
    assert shown.trace_ids()[:2] == ["t_0", "t_1"] and "t_21" in shown.trace_ids()

    applied = apply_preview(store, shown)

    assert len(applied.valid) == 2
    assert store.read_text("L2", "chat") == shown.after
    assert len(server.requests) == 2  # the preview's; Apply asked nothing
    assert store.seen_traces("L2", "chat") == {f"t_{n}" for n in range(25)}


async def test_an_unanswered_chunk_leaves_its_traces_unseen_after_apply(
    store: MemoryStore, server: FakeLLMServer, model: ChatModel
) -> None:
    store.emit(make_record("t_1"))
    server.add(Reply(text="I will remember that!"))
    shown = await preview(store, model, layer="L2", key="chat", mode="update")
    assert not shown.marks_seen() and not shown.has_work()
    apply_preview(store, shown)
    assert store.seen_traces("L2", "chat") == set()


async def test_a_preview_of_an_edited_document_is_refused_and_writes_nothing(
    store: MemoryStore,
) -> None:
    store.overwrite("L3", "profile", "# P\n\n## S\n\n- Likes examples\n- likes examples!\n")
    shown = await preview(store, None, layer="L3", key="profile", mode="merge")
    assert shown.has_work()
    store.overwrite("L3", "profile", "# P\n\n## S\n\n- Edited by hand\n")
    hand = store.read_text("L3", "profile")
    with pytest.raises(StaleDocumentError, match="changed since the preview"):
        apply_preview(store, shown)
    assert store.read_text("L3", "profile") == hand


def test_apply_ops_refuses_a_result_other_than_the_expected_one(store: MemoryStore) -> None:
    store.emit(make_record("t_1"))
    base = store.read_text("L2", "chat")
    add = {"op": "add", "section": "S", "text": "Likes examples", "refs": ["t_1"]}
    with pytest.raises(StaleDocumentError, match="would not give the previewed text"):
        store.apply_ops("L2", "chat", [add], base=base, expect="# something else\n")
    assert store.read_text("L2", "chat") == base
