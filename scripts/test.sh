#!/usr/bin/env bash
# Installs what is needed, then runs every check: lint, format, strict types, the whole test suite
# (unit, end-to-end kernels, notebooks under nbval). Extra arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
echo "==> ruff"
.venv/bin/ruff check deeptutor_jupyter tests benchmarks
.venv/bin/ruff format --check deeptutor_jupyter tests benchmarks
echo "==> mypy (strict)"
.venv/bin/mypy
echo "==> pytest"
# pytest exits 5 when it collected nothing; that is a failure here like any other non-zero code.
.venv/bin/python -m pytest "$@"
