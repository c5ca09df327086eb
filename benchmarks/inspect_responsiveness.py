"""How fast a kernel answers a trivial cell while ``inspect_variable`` works on a hostile value.

A real IPython kernel (``jupyter_client``, the e2e tests' ``KernelDriver``) holds a ``Spin``
object whose ``__repr__`` never returns and a 50-million-item list. The fake model asks
``inspect_variable`` about the spinning one; while that runs (in a forked child of the kernel
on Linux, else on a thread, with ``INSPECT_SECONDS`` raised so the inspection lasts the whole
measurement) the script times
``execute_request("1 + 1")`` -> ``execute_reply``. The same cell is timed first with the kernel
idle; the ratio of the medians says what the hostile inspection costs the learner. Then Stop is
clicked and the time until the turn shows "stopped" is printed (goal: under 1 s), and finally a
second turn inspects the big list (time until its answer).

Usage::

    .venv/bin/python benchmarks/inspect_responsiveness.py           # 30 cells each
    .venv/bin/python benchmarks/inspect_responsiveness.py --quick   # 3 cells each (smoke test)

Before the fix the kernel froze on the first hostile repr: the trivial cell never came back.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from deeptutor_jupyter.testing import FakeLLMServer, Reply, ToolCallSpec  # noqa: E402
from tests.e2e.kernel_driver import KernelDriver, kernel_env  # noqa: E402
from tests.e2e.test_inspect_kernel import SETUP as HOSTILE  # noqa: E402

# The test's hostile objects, with the time limit lifted so the work really spins meanwhile.
SETUP = (
    HOSTILE
    + """
import deeptutor_jupyter.kernel.notebook_context as _nbc
_nbc.INSPECT_SECONDS = 600
"""
)


def trivial_cell_ms(k: KernelDriver) -> float:
    start = time.perf_counter()
    k.execute("1 + 1")
    return (time.perf_counter() - start) * 1000


def status_of(k: KernelDriver, view: str) -> str:
    mine = [s for s in k.with_class("dt-status") if s in k.descendants(view)]
    return str(k.widgets[mine[0]]["value"]) if mine else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=30, help="trivial cells timed in each phase")
    parser.add_argument("--quick", action="store_true", help="3 cells each (smoke test)")
    args = parser.parse_args(argv)
    n = 3 if args.quick else max(1, args.n)
    print(f"inspect responsiveness benchmark: real kernel, {n} trivial cells per phase")
    with tempfile.TemporaryDirectory(prefix="dt-inspect-bench-") as tmp, FakeLLMServer() as server:
        home = Path(tmp)
        server.extend(
            [
                Reply(tool_calls=[ToolCallSpec("inspect_variable", {"name": "spin"}, id="c1")]),
                Reply(tool_calls=[ToolCallSpec("inspect_variable", {"name": "big"}, id="c2")]),
                Reply(text="A long list of zeros."),
            ]
        )
        k = KernelDriver(kernel_env(home, server, DEEPTUTOR_LANGUAGE="en"), cwd=home)
        try:
            k.execute("%load_ext deeptutor_jupyter")
            k.execute(SETUP)
            idle = [trivial_cell_ms(k) for _ in range(n)]
            k.execute("%tutor what is spin?")
            view = k.wait_for(lambda: k.with_class("dt-turn") and k.with_class("dt-turn")[0])
            k.wait_for(lambda: "True" in k.stream_text(k.execute("print(Spin.mark.exists())")))
            busy = [trivial_cell_ms(k) for _ in range(n)]
            stop = next(b for b in k.with_class("dt-stop") if b in k.descendants(view))
            start = time.perf_counter()
            k.click(stop)
            k.wait_for(lambda: "stopped" in status_of(k, view))
            stop_ms = (time.perf_counter() - start) * 1000
            start = time.perf_counter()
            k.execute("%tutor what is big?")
            second = k.wait_for(lambda: [v for v in k.with_class("dt-turn") if v != view])[0]
            k.wait_for(lambda: "done" in status_of(k, second), timeout=120)
            big_ms = (time.perf_counter() - start) * 1000
        finally:
            k.shutdown()
    idle_ms, busy_ms = statistics.median(idle), statistics.median(busy)
    print(f"trivial cell, kernel idle:                      median {idle_ms:8.2f} ms")
    print(f"trivial cell, inspect_variable on a spinning repr: median {busy_ms:8.2f} ms")
    print(f"ratio busy/idle: {busy_ms / idle_ms:.2f}")
    verdict = "PASS" if stop_ms < 1000 else "FAIL"
    print(f"Stop -> turn shows stopped: {stop_ms:.1f} ms (goal < 1000 ms: {verdict})")
    print(f"turn inspecting a 50,000,000-item list, start to done: {big_ms:.1f} ms")
    print(f"RESULT: ratio busy/idle {busy_ms / idle_ms:.2f}, stop {stop_ms:.0f} ms ({verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
