#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py): encode, train, serve and scale figures as one table.
#   benchmarks/gpu_check.sh [--dry-run] [--out PATH]    (--dry-run: tiny sizes on the CPU; automatic without CUDA)
# Uses the environment at CONTRASTEXT_VENV (default: .venv in the repository), as scripts/test.sh does.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${CONTRASTEXT_VENV:-$root/.venv}/bin/python"
[ -x "$python" ] || { echo "gpu_check: no environment at $python (run scripts/setup.sh)" >&2; exit 1; }
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
cd "$root"
exec "$python" "$root/benchmarks/gpu_check.py" "$@"
