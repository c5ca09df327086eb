#!/usr/bin/env bash
# Installs what is needed, then runs every check: lint, format, strict types, the whole test suite
# (unit, end-to-end kernels, the notebooks of notebooks/ run by tests/notebooks). Extra arguments
# go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
# UI tests drive real JupyterLab in Debian's Chromium (never a downloaded browser build).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing Chromium from Debian's packages (UI tests)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "Chromium is missing: install Debian's 'chromium' package to run the UI tests." >&2
    exit 1
  fi
fi
# The Chinese UI test (tests/ui/test_i18n_lab.py) screenshots the panel in zh_CN: without a CJK
# font Chromium draws boxes.
if [ -z "$(fc-list :lang=zh 2>/dev/null || true)" ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing a CJK font from Debian's packages (Chinese UI screenshots)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-wqy-microhei >/dev/null
  else
    echo "No CJK font: Chinese screenshots show boxes (Debian package 'fonts-wqy-microhei')." >&2
  fi
fi
# Hub tests (tests/hub): configurable-http-proxy from npm into .venv/node (never global), and
# Debian's PostgreSQL for the two-replica test.
if [ ! -x .venv/node/node_modules/.bin/configurable-http-proxy ]; then
  if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing Node.js and npm from Debian's packages (hub tests)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  fi
  if command -v npm >/dev/null 2>&1; then
    echo "==> installing configurable-http-proxy into .venv/node (hub tests)"
    mkdir -p .venv/node
    npm install --prefix .venv/node --no-audit --no-fund --silent configurable-http-proxy@5 >/dev/null
  else
    echo "npm is missing: the hub tests will skip (install Debian's 'npm' package)." >&2
  fi
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing PostgreSQL from Debian's packages (hub replica tests)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "PostgreSQL is missing: the hub replica tests will skip (Debian package 'postgresql')." >&2
  fi
fi
echo "==> ruff"
.venv/bin/ruff check deeptutor_jupyter tests benchmarks scripts
.venv/bin/ruff format --check deeptutor_jupyter tests benchmarks scripts
echo "==> labextension: types (the tests' too), eslint, prettier, vitest"
(
  cd labextension
  # tsconfig.json builds src without its tests; tsconfig.test.json checks both, emits nothing.
  npx --no-install tsc --noEmit -p tsconfig.test.json
  npx --no-install eslint src
  npx --no-install prettier --check --log-level warn "src/**/*.{ts,tsx}" "style/**/*.css"
  npx --no-install vitest run --reporter=dot
)
echo "==> mypy (strict)"
.venv/bin/mypy
echo "==> pytest"
# pytest exits 5 when it collected nothing; that is a failure here like any other non-zero code.
if [ "$#" -gt 0 ]; then
  .venv/bin/python -m pytest "$@"
else
  # The browser and hub suites run in a second process beside the rest (scripts/pytest_pair.py).
  .venv/bin/python scripts/pytest_pair.py
fi
