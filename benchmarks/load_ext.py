"""How long ``%load_ext deeptutor_jupyter`` takes in a fresh interpreter.

Each sample is a new Python process (so nothing is cached in ``sys.modules``) that imports
IPython, creates an ``InteractiveShell`` and then times only the ``%load_ext`` call with
``time.perf_counter``; the child prints its timings and the ``sys.modules`` diff as JSON.

Two scenarios run in the same invocation:

* ``shell``: a bare ``InteractiveShell`` (the goal applies here: under 150 ms);
* ``kernel``: the same, after ``import ipykernel.ipkernel``, so modules a real kernel already
  holds (asyncio, uuid, ...) are not charged to the extension.

Usage::

    .venv/bin/python benchmarks/load_ext.py            # 15 processes per scenario
    .venv/bin/python benchmarks/load_ext.py -n 3       # quicker
    .venv/bin/python benchmarks/load_ext.py --quick    # 1 process per scenario (smoke test)

Timings are from one run on one machine: compare the lines of the same run, not across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

GOAL_MS = 150.0
HEAVY = ("httpx", "pydantic", "ipywidgets", "sqlite3")
SCENARIOS = ("shell", "kernel")
REPO = Path(__file__).resolve().parent.parent


def child(scenario: str) -> None:
    """Runs in the fresh interpreter: time IPython, then time only ``%load_ext``."""
    import time

    tp = time.perf_counter()
    if scenario == "kernel":
        import ipykernel.ipkernel  # noqa: F401  (what a running kernel has already imported)

    t0 = time.perf_counter()
    from IPython.core.interactiveshell import InteractiveShell

    t1 = time.perf_counter()
    shell = InteractiveShell.instance()
    t2 = time.perf_counter()
    before = set(sys.modules)
    shell.run_line_magic("load_ext", "deeptutor_jupyter")
    t3 = time.perf_counter()
    added = sorted(set(sys.modules) - before)
    registered = "tutor" in shell.magics_manager.magics["line"]
    report = {
        "preload_ms": (t0 - tp) * 1e3,
        "import_ipython_ms": (t1 - t0) * 1e3,
        "shell_init_ms": (t2 - t1) * 1e3,
        "load_ext_ms": (t3 - t2) * 1e3,
        "registered": registered,
        "added": added,
        "heavy_before": [m for m in HEAVY if m in before],
    }
    # Stop IPython's history thread before the interpreter exits.
    shell.history_manager.end_session()
    print(json.dumps(report))


def run_child(scenario: str, ipython_dir: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["IPYTHONDIR"] = ipython_dir  # no writes to the user's profile
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", scenario],
        env=env,
        cwd=str(REPO),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if out.returncode != 0:
        raise SystemExit(f"child ({scenario}) failed with {out.returncode}:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile; fine for the handful of samples a benchmark takes."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def stat_line(label: str, values: list[float]) -> str:
    return f"  {label:<32} median {median(values):7.1f} ms   p90 {percentile(values, 90):7.1f} ms"


def module_groups(added: list[str]) -> str:
    tops: dict[str, int] = {}
    for name in added:
        top = name.split(".", 1)[0]
        tops[top] = tops.get(top, 0) + 1
    return ", ".join(f"{t}({n})" if n > 1 else t for t, n in sorted(tops.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=15, help="fresh processes per scenario")
    parser.add_argument("--quick", action="store_true", help="1 process per scenario, no warm-up")
    parser.add_argument("--child", choices=SCENARIOS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    n = 1 if args.quick else max(1, args.n)
    warmup = 0 if args.quick else 2

    import IPython

    print(
        f"load_ext benchmark: {n} fresh interpreter(s) per scenario, {warmup} warm-up; "
        f"Python {sys.version.split()[0]}, IPython {IPython.__version__}, "
        f"{os.cpu_count()} CPU(s)"
    )
    passed = True
    with tempfile.TemporaryDirectory(prefix="dt-bench-ipython-") as ipython_dir:
        for scenario in SCENARIOS:
            for _ in range(warmup):  # creates the profile dir, warms the OS file cache
                run_child(scenario, ipython_dir)
            samples = [run_child(scenario, ipython_dir) for _ in range(n)]
            if not all(s["registered"] for s in samples):
                print(f"[{scenario}] ERROR: %tutor was not registered by %load_ext")
                return 1
            title = {
                "shell": "fresh InteractiveShell",
                "kernel": "fresh InteractiveShell after `import ipykernel.ipkernel`",
            }[scenario]
            print(f"[{scenario}] {title}")
            if scenario == "kernel":
                pre = [s["preload_ms"] for s in samples]
                print(stat_line("reference: import ipykernel", pre))
            else:
                ipy = [s["import_ipython_ms"] for s in samples]
                print(stat_line("reference: import IPython shell", ipy))
            print(stat_line("reference: InteractiveShell()", [s["shell_init_ms"] for s in samples]))
            load = [s["load_ext_ms"] for s in samples]
            ok = median(load) < GOAL_MS
            passed = passed and (ok or scenario != "shell")
            print(
                stat_line("%load_ext deeptutor_jupyter", load)
                + f"   goal < {GOAL_MS:.0f} ms: {'PASS' if ok else 'FAIL'}"
            )
            last = samples[-1]
            added = set(last["added"])
            states = []
            for mod in HEAVY:
                if mod in last["heavy_before"]:
                    states.append(f"{mod}=already loaded before load_ext")
                elif mod in added:
                    states.append(f"{mod}=IMPORTED by load_ext")
                    passed = False
                else:
                    states.append(f"{mod}=not imported")
            print(f"  heavy modules: {'; '.join(states)}")
            own = [m for m in last["added"] if m.startswith("deeptutor_jupyter")]
            other = [m for m in last["added"] if not m.startswith("deeptutor_jupyter")]
            print(
                f"  modules added by load_ext: {len(last['added'])} ({len(own)} deeptutor_jupyter)"
            )
            print(f"    deeptutor_jupyter: {', '.join(own)}")
            print(f"    others by package: {module_groups(other) or '-'}")
    print(
        f"RESULT: {'PASS' if passed else 'FAIL'} "
        f"(goal: %load_ext under {GOAL_MS:.0f} ms, no heavy imports)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
