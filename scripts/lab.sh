#!/usr/bin/env bash
# Installs what is needed, then opens JupyterLab on the quickstart notebook with the tutor ready.
#
# JupyterLab autosaves what it opens, and the notebooks in notebooks/ are tracked: the learner
# works on copies in my-notebooks/ (or $DEEPTUTOR_LAB_DIR). A copy already there is the
# learner's own work and is never overwritten; a notebook added later is copied in.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${DEEPTUTOR_LAB_DIR:-$root/my-notebooks}"
"$root/scripts/setup.sh"
(cd "$root/notebooks" && find . -type f -not -path '*/.ipynb_checkpoints/*') | while read -r f; do
  if [ ! -e "$work/$f" ]; then
    mkdir -p "$(dirname "$work/$f")"
    cp "$root/notebooks/$f" "$work/$f"
  fi
done
extra=()
if [ "$(id -u)" = "0" ]; then extra+=(--allow-root); fi
cd "$work"
exec "$root/.venv/bin/jupyter" lab quickstart.ipynb "${extra[@]}" "$@"
