"""Background consolidation in a real kernel: it runs after turns without holding the kernel,
the workbench says what it did, and its checkbox turns it off in settings.toml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deeptutor_jupyter.config import write_settings
from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.e2e.conftest import kernel_env
from tests.e2e.kernel_driver import KernelDriver
from tests.e2e.test_memory_and_kb_kernel import done

pytestmark = pytest.mark.e2e
JOIN = (
    "from deeptutor_jupyter.kernel.magics import current_tutor\n"
    "assert current_tutor().session.upkeep.join(30)"
)


def ops_reply(*ops: dict, delay: float = 0.0) -> Reply:
    return Reply(text=json.dumps({"ops": list(ops)}), delay=delay)


def trace_ids(home: Path) -> list[str]:
    lines = []
    for path in sorted((home / "memory" / "trace").rglob("*.jsonl")):
        lines += [json.loads(line) for line in path.read_text().splitlines()]
    return [line["trace_id"] for line in sorted(lines, key=lambda r: r["started_at"])]


def test_memory_keeps_itself_current_and_the_workbench_says_so(tmp_path: Path):
    home = tmp_path / "home"
    # Switched on the way a learner would, in settings.toml; the empty variable does not count.
    write_settings({"auto_consolidate": True, "consolidate_every": 2}, home=home)
    log = home / "memory" / "consolidation.jsonl"
    with FakeLLMServer([Reply(text="An eigenvector keeps its direction.")]) as server:
        env = kernel_env(tmp_path, server, DEEPTUTOR_AUTO_CONSOLIDATE="")
        k = KernelDriver(env, cwd=tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter")
            k.execute("%tutor What is an eigenvector?")
            done(k)
            k.execute(JOIN)
            assert not log.exists()  # one trace: not due
            [first] = trace_ids(home)
            server.extend(
                [
                    Reply(text="Seven."),
                    # Slow enough that the kernel is asked something while it waits.
                    ops_reply(
                        {"op": "add", "section": "Topics", "text": "Eigenvectors", "refs": [first]},
                        delay=4.0,
                    ),
                    ops_reply(
                        {"op": "add", "section": "Level", "text": "Beginner", "refs": [first]}
                    ),
                ]
            )
            k.execute("%tutor And 2*3+1")
            done(k, 2)
            # The kernel answers a cell while the consolidation still waits for the model.
            msg_id = k.execute("print(40 + 2)")
            assert k.stream_text(msg_id) == "42\n"
            assert not log.exists()
            k.execute(JOIN)
            assert server.pending == 0
            assert "Eigenvectors" in (home / "memory" / "L2" / "notebook.md").read_text()
            assert "Beginner" in (home / "memory" / "L3" / "profile.md").read_text()
            [run] = [json.loads(line) for line in log.read_text().splitlines()]
            assert {d["document"]: d["consumed"] for d in run["documents"]} == {
                "L2/notebook.md": sorted(trace_ids(home)),
                "L3/profile.md": sorted(trace_ids(home)),
            }

            k.execute("%tutor memory")
            [status] = k.with_class("dt-memory-auto-status")
            text = k.widgets[status]["value"]
            assert "Last ran" in text and "openai-compatible/fake-model" in text
            assert "Notes from notebooks read 2 traces, 1 op applied" in text
            assert "About you read 2 traces, 1 op applied" in text
            [box] = k.with_class("dt-memory-auto")
            assert k.widgets[box]["value"] is True

            k.send_comm(box, {"method": "update", "state": {"value": False}, "buffer_paths": []})
            settings = home / "settings.toml"
            k.wait_for(lambda: "auto_consolidate = false" in settings.read_text())
            k.wait_for(lambda: "Off:" in str(k.widgets[status]["value"]))

            # Off: two more turns, and only the turns ask the model.
            server.extend([Reply(text="c"), Reply(text="d")])
            k.execute("%tutor three")
            done(k, 3)
            k.execute("%tutor four")
            done(k, 4)
            k.execute(JOIN)
            assert server.pending == 0 and len(server.requests) == 6
            assert len(log.read_text().splitlines()) == 1
        finally:
            k.shutdown()


def test_a_failed_run_shows_in_the_workbench_not_in_the_cell(tmp_path: Path):
    with FakeLLMServer() as server:
        server.extend(
            [Reply(text="a"), Reply(text="b"), Reply(text="I cannot do JSON."), ops_reply()]
        )
        env = kernel_env(
            tmp_path, server, DEEPTUTOR_AUTO_CONSOLIDATE="true", DEEPTUTOR_CONSOLIDATE_EVERY="2"
        )
        k = KernelDriver(env, cwd=tmp_path)
        try:
            k.execute("%load_ext deeptutor_jupyter\n%tutor one")
            done(k)
            k.execute("%tutor two")
            done(k, 2)
            k.execute(JOIN)
            assert server.pending == 0
            # Nothing the kernel sent so far (cells, widget updates) mentions the failure.
            shown = json.dumps([m["content"] for m in k.iopub])
            assert "not JSON" not in shown and "cannot do JSON" not in shown
            k.execute("%tutor memory")
            [status] = k.with_class("dt-memory-auto-status")
            text = k.widgets[status]["value"]
            assert "Notes from notebooks failed" in text and "not JSON" in text
            assert "retried" in text
            assert (tmp_path / "home" / "memory" / "L2" / "notebook.md").exists() is False
        finally:
            k.shutdown()
