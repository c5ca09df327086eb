"""``%tutor kb add`` in a real kernel: progress coalesced, a readable fallback when saved."""

from __future__ import annotations

from pathlib import Path

import pytest

from deeptutor_jupyter.testing import FakeLLMServer
from tests.e2e.kernel_driver import KernelDriver, kernel_env

pytestmark = pytest.mark.e2e


def test_kb_add_sends_a_few_progress_updates_and_leaves_text(tmp_path: Path) -> None:
    course = tmp_path / "course"
    course.mkdir()
    n_files = 600
    for i in range(n_files):
        (course / f"n{i:04d}.md").write_text(f"# Note {i}\n\nvectors and matrices {i}\n")
    (course / "photo.md").write_bytes(b"\x89PNG\x00\x00binary")
    with FakeLLMServer() as server:
        k = KernelDriver(kernel_env(tmp_path, server), cwd=tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter")
            msg_id = k.execute(f"%tutor kb add notes {course}")
            k.wait_for(
                lambda: any("600 added" in str(w.get("value", "")) for w in k.widgets.values()),
                timeout=120,
            )
            (bar,) = [c for c, w in k.widgets.items() if w.get("_model_name") == "IntProgressModel"]
            updates = [
                m
                for m in k.iopub
                if m["header"]["msg_type"] == "comm_msg"
                and m["content"]["comm_id"] == bar
                and "value" in m["content"]["data"].get("state", {})
            ]
            # Two per file before (1,200 here); now a few a second whatever the file count.
            assert 1 <= len(updates) < n_files // 4
            k.wait_for(
                lambda: any(m["header"]["msg_type"] == "update_display_data" for m in k.iopub)
            )
            shown = next(
                m["content"]["data"]
                for m in reversed(k.iopub)
                if m["header"]["msg_type"] == "update_display_data"
            )
            assert "application/vnd.jupyter.widget-view+json" in shown
            assert "**notes**: 600 added" in shown["text/plain"]
            assert "photo.md: skipped" in shown["text/plain"]
            first = [m["content"]["data"] for m in k.outputs_of(msg_id) if "data" in m["content"]]
            assert any("VBox(" not in d.get("text/plain", "VBox(") for d in first)
            # Only the paths given are looked at; one that is gone is dropped from the index.
            (course / "n0001.md").unlink()
            k.execute(f"%tutor kb refresh notes {course / 'n0001.md'}")
            k.wait_for(
                lambda: any(
                    "0 added, 0 updated, 1 removed, 599 unchanged" in str(w.get("value", ""))
                    for w in k.widgets.values()
                ),
                timeout=120,
            )
        finally:
            k.shutdown()
