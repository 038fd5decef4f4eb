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
# fails. uv reads no pip settings: the indexes and wheel folders pip would use are handed to it.
pip_setting() {  # a pip setting as pip reads it: PIP_<NAME> in the environment, else pip's config files
  local env="PIP_$(echo "$1" | tr 'a-z-' 'A-Z_')"
  if [ -n "${!env:-}" ]; then echo "${!env}"; else "$venv/bin/python" -m pip config get "global.$1" 2>/dev/null || true; fi
}
install=("${pip[@]}") installer=pip default_index=""
if [ "${CONTRASTEXT_USE_UV:-1}" = 1 ] && "${pip[@]}" uv >/dev/null 2>&1; then
  # where PYTHONDONTWRITEBYTECODE is set, Python never writes .pyc files, so every Ray worker would compile
  # its imports again (2.6 s more per worker process here): compile them at install, as pip does (25 s)
  install=("$venv/bin/uv" pip install --quiet ${PYTHONDONTWRITEBYTECODE:+--compile-bytecode}
           --python "$venv/bin/python") installer=uv
  for key in extra-index-url find-links; do
    read -ra values <<< "$(pip_setting "$key")"
    for value in "${values[@]}"; do install+=("--$key" "$value"); done
  done
  case "$(pip_setting no-index)" in 1|true|yes|on) install+=(--no-index) ;; esac
  # pip takes the best version from any index; uv by default only from the first that has the package
  [ -n "$(pip_setting extra-index-url)" ] && install+=(--index-strategy unsafe-best-match)
  index_url="$(pip_setting index-url)"
  default_index="${index_url:+--index-url $index_url}"
fi
installed() {  # installed "<index options for uv alone: pip reads its own>" <pip install arguments...>
  local -a uv_index=()
  read -ra uv_index <<< "$1"
  shift
  if [ "$installer" = uv ]; then
    "${install[@]}" "${uv_index[@]}" "$@" && return 0
    echo "setup: uv failed; pip instead" >&2
  fi
  "${pip[@]}" "$@"
}
echo "setup: installing torch==$torch_version into $venv (with $installer)" >&2
if [ -n "${TORCH_INDEX_URL:-}" ]; then
  installed "" "torch==$torch_version" --index-url "$TORCH_INDEX_URL"
else
  installed "$default_index" "torch==$torch_version"
fi
echo "setup: installing contrastext and its dependencies" >&2
installed "$default_index" -e "$root[test,docs]"
echo "$want" > "$stamp"
echo "setup: done ($venv)" >&2
