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
# Code answers of quizzes are graded in bubblewrap when it can run, else under Landlock with
# libseccomp's filter (learning/sandbox.py, sandbox_confine.py): install both from Debian's packages.
sandbox_packages=()
command -v bwrap >/dev/null 2>&1 || sandbox_packages+=(bubblewrap)
ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2 ' || sandbox_packages+=(libseccomp2)
if [ ${#sandbox_packages[@]} -gt 0 ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "==> installing ${sandbox_packages[*]} from Debian's packages (quiz code sandbox)"
  { apt-get install -y -qq "${sandbox_packages[@]}" >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${sandbox_packages[@]}" >/dev/null; }; } ||
    echo "${sandbox_packages[*]} could not be installed; code answers of quizzes may not be run (docs/learning.md)." >&2
fi
stamp=.venv/.deeptutor-installed
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "==> installing Python packages into .venv"
  # pip writes the wheel's shared data through the development link made below, which would put
  # a second install.json into the build folder (and hatchling then refuses to build): unlink first.
  if [ -L .venv/share/jupyter/labextensions/deeptutor-jupyter ]; then
    rm .venv/share/jupyter/labextensions/deeptutor-jupyter
  fi
  rm -f deeptutor_jupyter/labextension/install.json
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[test,lab]'
  echo "$want" > "$stamp"
fi

# The JupyterLab sidebar (labextension/, TypeScript): rebuilt only when its sources changed.
# `pip install -e` builds it once through hatch-jupyter-builder; this keeps it current after that.
if ! command -v npm >/dev/null 2>&1; then
  echo "npm (Node.js 20+) is needed to build the JupyterLab sidebar: install Debian's 'nodejs' and 'npm'." >&2
  exit 1
fi
lab_stamp=.venv/.deeptutor-labextension
lab_want="$(
  cd labextension
  { cat package.json package-lock.json tsconfig.json; find src style schema -type f | LC_ALL=C sort | xargs cat; } \
    | sha256sum | cut -d' ' -f1
)"
if [ ! -f deeptutor_jupyter/labextension/static/style.js ] || [ ! -d labextension/node_modules ] \
  || [ ! -f "$lab_stamp" ] \
  || [ "$(cat "$lab_stamp")" != "$lab_want" ]; then
  echo "==> building the JupyterLab sidebar (labextension/)"
  (
    cd labextension
    log="$root/.venv/labextension-build.log"
    if ! { npm install --no-audit --no-fund --loglevel=error \
      && PATH="$root/.venv/bin:$PATH" npm run --silent build:prod; } >"$log" 2>&1; then
      cat "$log" >&2
      echo "The JupyterLab sidebar did not build (log above, also in $log)." >&2
      exit 1
    fi
  )
  echo "$lab_want" > "$lab_stamp"
fi
# Editable installs serve the build folder itself, so a rebuild is live after a page reload.
if [ ! -L .venv/share/jupyter/labextensions/deeptutor-jupyter ]; then
  PATH="$root/.venv/bin:$PATH" .venv/bin/jupyter-builder develop --overwrite . >/dev/null 2>&1 \
    || PATH="$root/.venv/bin:$PATH" .venv/bin/jupyter labextension develop --overwrite . >/dev/null
fi

# A real learning record store for tests/hub/test_xapi_lrs.py: Ralph (ralph-malph 5.x, file
# backend) in its own venv, since it pins httpx and cachetools below what .venv holds.
if [ ! -x .venv-lrs/bin/ralph ]; then
  echo "==> installing the LRS used by the tests into .venv-lrs"
  "$python" -m venv .venv-lrs
  .venv-lrs/bin/python -m pip install --quiet "ralph-malph[cli,lrs]>=5,<6" requests
fi
