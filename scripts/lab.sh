#!/usr/bin/env bash
# Installs what is needed, then opens JupyterLab on the quickstart notebook with the tutor ready.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
extra=()
if [ "$(id -u)" = "0" ]; then extra+=(--allow-root); fi
exec .venv/bin/jupyter lab notebooks/quickstart.ipynb "${extra[@]}" "$@"
