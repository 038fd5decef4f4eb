#!/usr/bin/env bash
# Set up (idempotent), then run the main job on its embedded default on a local Ray.
# Extra arguments go to the job, e.g. --set train.epochs=2
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
# one machine: each fit trains in the job's process rather than on a Ray Train worker group (~8 s less a fit)
export CONTRASTEXT_TRAIN_IN_PROCESS="${CONTRASTEXT_TRAIN_IN_PROCESS:-1}"
cd "$root"
exec "${CONTRASTEXT_VENV:-$root/.venv}/bin/python" jobs/wcsbert_selftrain.py "$@"
