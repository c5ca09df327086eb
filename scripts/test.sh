#!/usr/bin/env bash
# Installs what is needed, then runs every check: lint, format, strict types, the whole test suite
# (unit, end-to-end kernels, notebooks under nbval). Extra arguments go to pytest.
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
echo "==> ruff"
.venv/bin/ruff check deeptutor_jupyter tests benchmarks
.venv/bin/ruff format --check deeptutor_jupyter tests benchmarks
echo "==> labextension: eslint, prettier, vitest (form rules)"
(
  cd labextension
  npx --no-install eslint src
  npx --no-install prettier --check --log-level warn "src/**/*.{ts,tsx}" "style/**/*.css"
  npx --no-install vitest run --reporter=dot
)
echo "==> mypy (strict)"
.venv/bin/mypy
echo "==> pytest"
# pytest exits 5 when it collected nothing; that is a failure here like any other non-zero code.
.venv/bin/python -m pytest "$@"
