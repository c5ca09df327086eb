"""Run the test suite as two pytest processes side by side, and report them as one.

Most of the suite's wall time is waiting: JupyterLab and Chromium starting, kernels starting,
hubs and proxies coming up. One process used about 0.7 of the machine's 2 cores, so the
browser and hub suites (``tests/ui``, ``tests/hub``) run in a second process beside the rest.
They share nothing but the machine: every test makes its own temp home, ports and servers.

The first group's output streams live; the second's is printed when it ends. The last line is
the sum of both: ``N passed, N failed``. The exit code is the first non-zero one; pytest's 5
(nothing collected) counts as a failure in either group. Extra arguments go to both.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import threading

BESIDE = ["tests/ui", "tests/hub"]
COUNTS = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")


def main(argv: list[str]) -> int:
    python = sys.executable
    common = ["-m", "pytest", "-p", "no:cacheprovider", *argv]
    rest = [python, *common, "tests", *(f"--ignore={d}" for d in BESIDE)]
    beside = [python, *common, *BESIDE]
    with tempfile.TemporaryFile("w+", encoding="utf-8") as log:
        second = subprocess.Popen(beside, stdout=log, stderr=subprocess.STDOUT, text=True)
        first_lines: list[str] = []
        first = subprocess.Popen(rest, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert first.stdout is not None

        def relay() -> None:
            for line in first.stdout:  # type: ignore[union-attr]
                first_lines.append(line)
                sys.stdout.write(line)
                sys.stdout.flush()

        reader = threading.Thread(target=relay, daemon=True)
        reader.start()
        codes = [first.wait(), second.wait()]
        reader.join()
        log.seek(0)
        second_text = log.read()
    print(f"\n==> pytest {' '.join(BESIDE)} (ran beside the rest)", flush=True)
    sys.stdout.write(second_text)
    totals: dict[str, int] = {}
    for text in ("".join(first_lines), second_text):
        summary = [ln for ln in text.splitlines() if COUNTS.search(ln) and " in " in ln]
        for number, word in COUNTS.findall(summary[-1] if summary else ""):
            key = "error" if word.startswith("error") else word
            totals[key] = totals.get(key, 0) + int(number)
    for name, code in zip(("rest", " ".join(BESIDE)), codes, strict=True):
        if code != 0:
            print(f"pytest ({name}) exited {code}", file=sys.stderr)
    extra = "".join(f", {totals[k]} {k}" for k in ("skipped", "error") if totals.get(k))
    print(f"{totals.get('passed', 0)} passed, {totals.get('failed', 0)} failed{extra}")
    return next((c for c in codes if c != 0), 0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
