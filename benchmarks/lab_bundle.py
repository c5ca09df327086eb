"""The sidebar's cost in JupyterLab: its gzipped bundle, and time to ready with and without it.

Two JupyterLab servers run side by side from the same install; in one, the extension is disabled
the way ``jupyter labextension disable`` does it (``labconfig/page_config.json``) and the server
extension is off. Headless Chromium (Debian's) loads ``/lab`` from each in turn, alternating, and
an init script records ``performance.now()`` when ``jupyterapp.restored`` resolves. Figures are
medians with p90 of one run; compare the lines of the same run only.

Usage::

    .venv/bin/python benchmarks/lab_bundle.py           # 7 page loads per variant
    .venv/bin/python benchmarks/lab_bundle.py -n 3
    .venv/bin/python benchmarks/lab_bundle.py --quick   # 1 page load per variant (smoke test)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from deeptutor_jupyter.testing.ports import free_port

REPO = Path(__file__).resolve().parent.parent
STATIC = REPO / "deeptutor_jupyter" / "labextension" / "static"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TOKEN = "bench-token"
GOAL_RATIO = 1.05
READY_SCRIPT = """
(() => {
  const poll = setInterval(() => {
    if (window.jupyterapp) {
      clearInterval(poll);
      window.jupyterapp.restored.then(() => { window.__deeptutorReady = performance.now(); });
    }
  }, 2);
})();
"""


def bundle_sizes() -> list[tuple[str, int, int]]:
    """(file, bytes, gzipped bytes) of every file the browser may load, largest first."""
    if not STATIC.is_dir():
        raise SystemExit(f"No built sidebar at {STATIC}: run bash scripts/setup.sh first.")
    out = []
    for path in sorted(STATIC.iterdir()):
        if path.suffix in (".js", ".css"):
            data = path.read_bytes()
            out.append((path.name, len(data), len(gzip.compress(data, compresslevel=9))))
    return sorted(out, key=lambda row: -row[2])


@contextmanager
def lab_server(root: Path, *, enabled: bool) -> Iterator[str]:
    config = root / ("config-on" if enabled else "config-off")
    (config / "labconfig").mkdir(parents=True)
    if not enabled:
        page = {"disabledExtensions": {"deeptutor-jupyter": True}}
        (config / "labconfig" / "page_config.json").write_text(json.dumps(page))
        server = {"ServerApp": {"jpserver_extensions": {"deeptutor_jupyter": False}}}
        (config / "jupyter_server_config.json").write_text(json.dumps(server))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPTUTOR_")}
    env.update(
        JUPYTER_CONFIG_DIR=str(config),
        DEEPTUTOR_HOME=str(root / "home"),
        IPYTHONDIR=str(root / "ipython"),
    )
    log = (root / f"lab-{'on' if enabled else 'off'}.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
            f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
            "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit(f"JupyterLab did not start; see {log.name}") from None
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def time_to_ready(browser: object, url: str) -> tuple[float, bool]:
    """Milliseconds from navigation to ``jupyterapp.restored``; and whether the panel is there."""
    page = browser.new_page(viewport={"width": 1300, "height": 900})  # type: ignore[attr-defined]
    try:
        page.add_init_script(READY_SCRIPT)
        page.goto(f"{url}/lab?reset&token={TOKEN}")
        page.wait_for_function("() => window.__deeptutorReady !== undefined", timeout=120000)
        ready = float(page.evaluate("() => window.__deeptutorReady"))
        has_panel = bool(page.evaluate("() => !!document.querySelector('#deeptutor-panel')"))
        return ready, has_panel
    finally:
        page.close()


def stats(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered):8.1f} ms   p90 {p90:8.1f} ms   (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=7, help="page loads per variant")
    parser.add_argument("--quick", action="store_true", help="one page load per variant")
    args = parser.parse_args()
    n = 1 if args.quick else max(args.n, 1)

    print("lab bundle benchmark:")
    rows = bundle_sizes()
    raw, packed = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"  bundle: {len(rows)} files, {raw / 1024:.1f} KiB raw, {packed / 1024:.1f} KiB gzipped")
    for name, size, gz in rows[:5]:
        print(f"    {name:<40} {size / 1024:8.1f} KiB  gzip {gz / 1024:7.1f} KiB")

    from playwright.sync_api import sync_playwright

    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        urls = {
            "without": stack.enter_context(lab_server(root, enabled=False)),
            "with": stack.enter_context(lab_server(root, enabled=True)),
        }
        p = stack.enter_context(sync_playwright())
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        stack.callback(browser.close)
        for variant in ("without", "with"):  # warm-up: first loads fill caches on both sides
            time_to_ready(browser, urls[variant])
        times: dict[str, list[float]] = {"without": [], "with": []}
        panels: dict[str, bool] = {}
        for _ in range(n):
            for variant in ("without", "with"):
                ready, panels[variant] = time_to_ready(browser, urls[variant])
                times[variant].append(ready)

    print("  time to ready (/lab, navigation -> jupyterapp.restored):")
    for variant in ("without", "with"):
        mark = "panel present" if panels[variant] else "no panel"
        print(f"    {variant:<8} extension: {stats(times[variant])}  [{mark}]")
    ratio = statistics.median(times["with"]) / statistics.median(times["without"])
    verdict = "met" if ratio < GOAL_RATIO else "NOT met"
    print(f"  ratio with/without (median): {ratio:.3f}")
    print(f"  goal < {GOAL_RATIO:.2f}: {verdict}")
    if panels.get("with") is not True or panels.get("without") is not False:
        raise SystemExit("RESULT: the variants did not differ as set up (panel check failed)")
    print(f"RESULT: bundle {packed / 1024:.1f} KiB gzipped; ready ratio {ratio:.3f} ({verdict})")


if __name__ == "__main__":
    main()
