"""Cost of grading one code answer in the sandbox, beside a bare ``python -c`` in the same run.

Variants, interleaved in every iteration so drift on a busy machine hits all of them alike:

* **bare python -c**: ``subprocess.run([python, "-I", "-S", "-c", code + tests])``, the least a
  separate process costs (the same base interpreter and flags the sandbox uses);
* **sandbox, rlimit**: ``Sandbox(mode="unsafe").run_sync``: a fresh temp folder, the runner
  file, resource limits, the audit hook, the outcome read back;
* **sandbox, bwrap**: the same inside bubblewrap (new namespaces, read-only mounts), when it
  works on this machine;
* **sandbox, landlock**: the same under Landlock + seccomp with the reaping supervisor (one more
  fork), when this kernel offers it.

Prints medians and p90 in milliseconds and the ratio of each sandbox variant to the bare process.

Usage::

    .venv/bin/python benchmarks/sandbox.py            # 30 iterations
    .venv/bin/python benchmarks/sandbox.py --quick    # 3 iterations (smoke test)

Timings are from one run on one machine: compare lines of the same run, not across runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from deeptutor_jupyter.learning.sandbox import (  # noqa: E402
    Sandbox,
    bwrap_works,
    landlock_problem,
    sandbox_python,
)

CODE = "def sq(x):\n    return x * x\n"
TESTS = "assert sq(3) == 9\nassert sq(-2) == 4\n"


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=30, help="iterations")
    parser.add_argument("--quick", action="store_true", help="3 iterations (smoke test)")
    args = parser.parse_args()
    n = 3 if args.quick else args.n
    python = sandbox_python()

    def bare() -> None:
        subprocess.run([python, "-I", "-S", "-c", CODE + TESTS], check=True, env={})

    variants: dict[str, Callable[[], object]] = {"bare python -c": bare}
    rlimit = Sandbox(mode="unsafe")
    variants["sandbox, rlimit"] = lambda: _check(rlimit.run_sync(CODE, TESTS, 5))
    has_bwrap = bwrap_works(python)
    if has_bwrap:
        bwrap = Sandbox(mode="bwrap")
        variants["sandbox, bwrap"] = lambda: _check(bwrap.run_sync(CODE, TESTS, 5))
    no_landlock = landlock_problem(python)
    if not no_landlock:
        landlock = Sandbox(mode="landlock")
        variants["sandbox, landlock"] = lambda: _check(landlock.run_sync(CODE, TESTS, 5))
    for action in variants.values():  # warm-up, not counted
        action()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(n):
        for name, action in variants.items():
            samples[name].append(timed(action))

    print(f"sandbox benchmark: {n} iterations, python {python}")
    if not has_bwrap:
        print("sandbox, bwrap: not available here (bubblewrap missing or namespaces forbidden)")
    if no_landlock:
        print(f"sandbox, landlock: not available here ({no_landlock})")
    for name, values in samples.items():
        print(f"{name:<18} median {statistics.median(values):7.1f} ms   p90 {p90(values):7.1f} ms")
    base = statistics.median(samples["bare python -c"])
    for name in variants:
        if name != "bare python -c":
            ratio = statistics.median(samples[name]) / base
            print(f"ratio {name} / bare python -c: {ratio:.2f}x")
    rlimit_ms = statistics.median(samples["sandbox, rlimit"])
    print(
        f"RESULT: one graded code answer costs {rlimit_ms:.0f} ms (rlimit) "
        f"= {rlimit_ms / base:.2f}x a bare python -c"
    )


def _check(outcome: object) -> None:
    if getattr(outcome, "status", None) != "passed":
        raise SystemExit(f"the benchmark's code did not pass: {outcome}")


if __name__ == "__main__":
    main()
