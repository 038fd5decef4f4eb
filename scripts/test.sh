#!/usr/bin/env bash
# Set up (idempotent), then run the test suite. Extra arguments go to pytest, e.g. -k losses
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
# the web page's browser test needs Chromium; CONTRASTEXT_NO_BROWSER=1 skips installing it (the test then skips)
[ "${CONTRASTEXT_NO_BROWSER:-0}" = 1 ] || "$root/scripts/setup_browser.sh"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
cd "$root"
exec "${CONTRASTEXT_VENV:-$root/.venv}/bin/python" -m pytest "$@"
