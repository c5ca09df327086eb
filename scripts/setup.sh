#!/usr/bin/env bash
# Creates .venv and installs the package with everything the product and the tests need.
# Idempotent and quick when nothing changed: a stamp records what was installed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "deeptutor-jupyter needs Python 3.11 or newer (found: $("$python" --version 2>&1))." >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$python" -m venv .venv
fi
# Code answers of quizzes are graded in bubblewrap when it is there (learning/sandbox.py).
if ! command -v bwrap >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "==> installing bubblewrap from Debian's packages (quiz code sandbox)"
  { apt-get install -y -qq bubblewrap >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }; } ||
    echo "bubblewrap could not be installed; the sandbox falls back to resource limits." >&2
fi
stamp=.venv/.deeptutor-installed
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "==> installing Python packages into .venv"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[test,lab]'
  echo "$want" > "$stamp"
fi
