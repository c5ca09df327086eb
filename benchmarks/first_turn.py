"""The first ``%tutor`` in a fresh kernel against the second (issue 14: 401 ms vs 20 ms).

Each sample is a new real ipykernel (tests/e2e/kernel_driver.py) with ``%load_ext`` done, its
bytecode cached as an installed package has it (one warm-up kernel, not counted); one
cell times, inside the kernel, ``%tutor`` plus ``await wait_for_turns()`` (a zero-delay
FakeLLMServer answers), twice. It also lists the heavy modules the first turn imported. Goal:
the first turn under 150 ms.

    .venv/bin/python benchmarks/first_turn.py [-n 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.e2e.kernel_driver import KernelDriver, kernel_env

GOAL_MS = 150.0
CELL = """
import json, sys, time, deeptutor_jupyter
_before = set(sys.modules)
_times = []
for _q in ("first", "second"):
    _t = time.perf_counter()
    get_ipython().run_line_magic("tutor", _q)
    await deeptutor_jupyter.wait_for_turns()
    _times.append((time.perf_counter() - _t) * 1000)
    if _q == "first":
        _added = sorted({m.split(".")[0] for m in set(sys.modules) - _before})
print(json.dumps({"times": _times, "added": _added}))
"""


def sample(tmp: Path, server: FakeLLMServer, cache: Path) -> dict[str, list]:  # type: ignore[type-arg]
    server.extend([Reply(text="One."), Reply(text="Two.")])
    env = kernel_env(tmp, server)
    # As an installed package is: bytecode cached (this machine sets PYTHONDONTWRITEBYTECODE,
    # which makes every fresh kernel compile ~60 modules, ~50 ms, from source).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    k = KernelDriver(env, cwd=tmp)
    try:
        k.execute("%load_ext deeptutor_jupyter")
        msg_id = k.execute(CELL)
        return dict(json.loads(k.stream_text(msg_id).strip().splitlines()[-1]))
    finally:
        k.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("-n", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    n = 1 if a.quick else a.n
    firsts, seconds, added = [], [], []
    with FakeLLMServer() as server, tempfile.TemporaryDirectory() as cache:
        for i in range(n + 1):  # the first fills the bytecode cache and is not counted
            with tempfile.TemporaryDirectory() as tmp:
                got = sample(Path(tmp), server, Path(cache))
            if i == 0:
                continue
            firsts.append(got["times"][0])
            seconds.append(got["times"][1])
            added = got["added"]
    first, second = statistics.median(firsts), statistics.median(seconds)
    print(f"first turn benchmark: {n} fresh kernels")
    print(f"first %tutor: {first:.0f} ms median (goal < {GOAL_MS:.0f} ms)")
    print(f"second %tutor: {second:.0f} ms median (the floor for a warm kernel)")
    heavy = [m for m in added if m in ("pydantic", "ipywidgets", "httpx", "jsonschema", "yaml")]
    print(f"heavy packages the first turn imported: {', '.join(heavy) or 'none'}")
    print(f"top-level packages the first turn imported: {len(added)}")
    print(f"RESULT: {'PASS' if first < GOAL_MS else 'FAIL'} first {first:.0f} ms")


if __name__ == "__main__":
    main()
