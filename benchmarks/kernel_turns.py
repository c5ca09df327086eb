"""What finished turns keep alive in a kernel (issue 14, row "finished turns in a kernel").

A real ipykernel runs ``-n`` short ``%tutor`` turns (FakeLLMServer) in one notebook session, each
awaited with ``wait_for_turns``. After a warm-up turn (the anchor) and after 1, 10 and ``-n`` more
it reads, inside the kernel, the live ipywidgets, the kernel's current RSS (``/proc/self/statm``)
and how many turns still hold a history copy, and judges the growth per turn between the first
and the last probe: a finished turn holds no widget (issue 28), RSS flat, no history copies.

    .venv/bin/python benchmarks/kernel_turns.py [-n 100] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.e2e.kernel_driver import KernelDriver, kernel_env

PROBE = """
import json, os, deeptutor_jupyter
from ipywidgets.widgets import widget as _w
_t = deeptutor_jupyter.kernel.magics.current_tutor()
with open("/proc/self/statm") as _f:
    _rss = int(_f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
print(json.dumps({
    "widgets": len(_w._instances),
    "rss_kb": _rss / 1024,
    "history_copies": sum(1 for t in _t.session.turns if t.ctx.history),
    "turns": len(_t.session.turns),
}))
"""
WIDGETS_PER_TURN = 0.5  # goal: a finished turn holds no widget
RSS_KB_PER_TURN = 20.0  # goal: flat (was +87 kB a turn)


def probe(k: KernelDriver) -> dict[str, float]:
    msg_id = k.execute(PROBE)
    return dict(json.loads(k.stream_text(msg_id).strip().splitlines()[-1]))


def plain_cells(steps: list[int]) -> dict[int, float]:
    """The anchor for RSS: a kernel with the extension loaded that runs the same number of
    cell pairs without a turn (IPython and ipykernel keep each cell's source, AST and
    message headers: what the kernel itself grows by, whatever the cells do)."""
    seen: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as server:
        server.extend([Reply(text="Short answer.")])
        k = KernelDriver(kernel_env(Path(tmp), server), cwd=Path(tmp))
        try:
            k.execute("%load_ext deeptutor_jupyter")
            k.execute("%tutor warm up")
            k.execute("import deeptutor_jupyter; await deeptutor_jupyter.wait_for_turns()")
            probe(k)
            done = 0
            for step in steps:
                while done < step:
                    k.execute(f"x = 'question {done}'")
                    k.execute("await deeptutor_jupyter.wait_for_turns();")
                    k.iopub.clear()
                    done += 1
                seen[step] = probe(k)["rss_kb"]
        finally:
            k.shutdown()
    return seen


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("-n", type=int, default=100)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    steps = [1, 3] if a.quick else sorted({1, 10, a.n})
    n = steps[-1]
    seen: dict[int, dict[str, float]] = {}
    plain = plain_cells(steps)
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as server:
        server.extend([Reply(text=f"Short answer number {i}.") for i in range(3 * n + 10)])
        k = KernelDriver(kernel_env(Path(tmp), server), cwd=Path(tmp))
        try:
            k.execute("%load_ext deeptutor_jupyter")
            k.execute("%tutor warm up")
            k.execute("import deeptutor_jupyter; await deeptutor_jupyter.wait_for_turns()")
            base = probe(k)  # the anchor: the same kernel after one turn
            done = 0
            for step in steps:
                while done < step:
                    k.execute(f"%tutor question {done}")
                    k.execute("await deeptutor_jupyter.wait_for_turns();")
                    k.iopub.clear()  # the driver's own record is not the kernel's memory
                    done += 1
                seen[step] = probe(k)
        finally:
            k.shutdown()
    print(f"kernel turns benchmark: {n} turns after a warm-up turn")
    print(
        f"anchor after the warm-up turn: {base['widgets']:.0f} live widgets, "
        f"RSS {base['rss_kb'] / 1024:.1f} MB"
    )
    for step, got in seen.items():
        print(
            f"  after {step:>3} more turns: {got['widgets']:.0f} live widgets "
            f"({(got['widgets'] - base['widgets']) / step:+.2f} a turn), RSS "
            f"{got['rss_kb'] / 1024:.1f} MB "
            f"({(got['rss_kb'] - base['rss_kb']) / step:+.1f} kB a turn)"
        )
    first, last = seen[steps[0]], seen[steps[-1]]
    span = steps[-1] - steps[0]
    per_turn = (last["widgets"] - first["widgets"]) / span
    rss_per_turn = (last["rss_kb"] - first["rss_kb"]) / span
    print(
        f"widgets per finished turn, {steps[0]} -> {steps[-1]}: {per_turn:.2f} "
        f"(goal <= {WIDGETS_PER_TURN}; issue 28: 10)"
    )
    plain_per_cell = (plain[steps[-1]] - plain[steps[0]]) / span
    print(
        f"RSS per finished turn, {steps[0]} -> {steps[-1]}: {rss_per_turn:+.1f} kB "
        f"(goal <= {RSS_KB_PER_TURN:.0f}; issue 28: +87); the same cells without a turn "
        f"(the anchor, same run): {plain_per_cell:+.1f} kB, so the turns' own "
        f"{rss_per_turn - plain_per_cell:+.1f} kB"
    )
    print(f"turns holding a history copy: {last['history_copies']:.0f} of {last['turns']:.0f}")
    ok = (
        last["history_copies"] == 0
        and per_turn <= WIDGETS_PER_TURN
        and rss_per_turn <= RSS_KB_PER_TURN
    )
    print(
        f"RESULT: {'PASS' if ok else 'FAIL'} {per_turn:.2f} widgets/turn, "
        f"{rss_per_turn:+.1f} kB/turn"
    )


if __name__ == "__main__":
    main()
