#!/usr/bin/env bash
# Idempotent set-up: a virtual environment with the pinned torch installed FIRST, then the project.
# Installing torch first matters: any unpinned "torch" requirement resolved on its own pulls a
# multi-GB CUDA build. Re-running is cheap: nothing is reinstalled unless pyproject.toml or the
# torch choice changed.
#   TORCH_VERSION    torch release to pin (default 2.13.0)
#   TORCH_INDEX_URL  index to take torch from (e.g. https://download.pytorch.org/whl/cu128 on GPU nodes)
#   CONTRASTEXT_VENV where the environment lives (default: .venv in the repository)
#   PYTHON           interpreter that creates it (default: python3; 3.10 or newer)
#   CONTRASTEXT_USE_UV=0  install with pip alone
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${CONTRASTEXT_VENV:-$root/.venv}"
torch_version="${TORCH_VERSION:-2.13.0}"
python="${PYTHON:-python3}"
stamp="$venv/.contrastext-setup"
want="$(sha256sum "$root/pyproject.toml" | cut -c1-16) torch==$torch_version ${TORCH_INDEX_URL:-}"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
"$python" - <<'PY' || { echo "setup: Python 3.10 or newer is needed (set PYTHON=...)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 10) else 1)
PY
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
# uv installs the same pins in seconds where pip takes minutes; pip does the work wherever uv cannot be had or
# fails. uv reads no pip.conf: extra wheel folders come from PIP_FIND_LINKS.
install=("${pip[@]}") installer=pip
if [ "${CONTRASTEXT_USE_UV:-1}" = 1 ] && "${pip[@]}" uv >/dev/null 2>&1; then
  # where PYTHONDONTWRITEBYTECODE is set, Python never writes .pyc files, so every Ray worker would compile
  # its imports again (2.6 s more per worker process here): compile them at install, as pip does (25 s)
  install=("$venv/bin/uv" pip install --quiet ${PYTHONDONTWRITEBYTECODE:+--compile-bytecode}
           --python "$venv/bin/python") installer=uv
  for links in ${PIP_FIND_LINKS:-}; do install+=(--find-links "$links"); done
fi
installed() { "${install[@]}" "$@" || { [ "$installer" = uv ] && echo "setup: uv failed; pip instead" >&2 && "${pip[@]}" "$@"; }; }
echo "setup: installing torch==$torch_version into $venv (with $installer)" >&2
installed "torch==$torch_version" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
echo "setup: installing contrastext and its dependencies" >&2
installed -e "$root[test,docs]"
echo "$want" > "$stamp"
echo "setup: done ($venv)" >&2
