"""What finished turns keep alive in a kernel (issue 14, row "finished turns in a kernel").

A real ipykernel runs ``-n`` short ``%tutor`` turns (FakeLLMServer) in one notebook session, each
awaited with ``wait_for_turns``. After a warm-up turn and at the end it reads, inside the kernel,
the live ipywidgets, the kernel's RSS and how many turns still hold a history copy. The goal is
memory flat in the number of turns: widgets per extra turn close to what a finished turn shows
(status, answer, its layout), no history copies.

    .venv/bin/python benchmarks/kernel_turns.py [-n 200] [--quick]
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
import json, resource, deeptutor_jupyter
from ipywidgets.widgets import widget as _w
_t = deeptutor_jupyter.kernel.magics.current_tutor()
print(json.dumps({
    "widgets": len(_w._instances),
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "history_copies": sum(1 for t in _t.session.turns if t.ctx.history),
    "turns": len(_t.session.turns),
}))
"""


def probe(k: KernelDriver) -> dict[str, float]:
    msg_id = k.execute(PROBE)
    return dict(json.loads(k.stream_text(msg_id).strip().splitlines()[-1]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("-n", type=int, default=200)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    n = 5 if a.quick else a.n
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as server:
        server.extend([Reply(text=f"Short answer number {i}.") for i in range(n + 1)])
        k = KernelDriver(kernel_env(Path(tmp), server), cwd=Path(tmp))
        try:
            k.execute("%load_ext deeptutor_jupyter")
            k.execute("%tutor warm up")
            k.execute("import deeptutor_jupyter; await deeptutor_jupyter.wait_for_turns()")
            first = probe(k)
            for i in range(n):
                k.execute(f"%tutor question {i}")
                k.execute("await deeptutor_jupyter.wait_for_turns();")
                k.iopub.clear()  # the driver's own record is not the kernel's memory
            last = probe(k)
        finally:
            k.shutdown()
    per_turn = (last["widgets"] - first["widgets"]) / n
    print(f"kernel turns benchmark: {n} turns after a warm-up turn")
    print(f"live widgets: {first['widgets']:.0f} after 1 turn, {last['widgets']:.0f} after {n + 1}")
    print(f"widgets per finished turn: {per_turn:.1f} (before: 22)")
    print(f"kernel max RSS: {first['rss_mb']:.0f} MB -> {last['rss_mb']:.0f} MB")
    print(f"turns holding a history copy: {last['history_copies']:.0f} of {last['turns']:.0f}")
    print(
        f"RESULT: {'PASS' if last['history_copies'] == 0 else 'FAIL'} {per_turn:.1f} widgets/turn"
    )


if __name__ == "__main__":
    main()
