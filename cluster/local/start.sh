#!/usr/bin/env bash
# Start a local, single-node Ray head for development, with Ray's token authentication ON, and print
# how to submit jobs to it. Idempotent: if it is already up, it only prints the instructions again.
#
#   cluster/local/start.sh                 # token auth (recommended)
#   cluster/local/start.sh --no-auth       # RAY_AUTH_MODE=disabled: single-user machines only (the GCS port
#                                          # listens on all interfaces: whoever reaches it can run code)
#   cluster/local/start.sh -- --num-gpus=1 # anything after -- goes to `ray start`
#   cluster/local/stop.sh                  # stops this cluster (and only this one)
#
# Environment (all optional):
#   CONTRASTEXT_RAY_DIR        Ray's --temp-dir and this script's state (default /tmp/ray-contrastext-$USER)
#   CONTRASTEXT_RAY_PORT       GCS port (default 6379)
#   CONTRASTEXT_DASHBOARD_PORT dashboard / job API port (default 8265)
#   CONTRASTEXT_CLIENT_PORT    Ray Client port (default 10001)
#   CONTRASTEXT_AGENT_PORT     dashboard agent's HTTP port (default: a free one, not Ray's 52365)
#                              (a default port that is taken is replaced by a free one; one you set is used as is)
#   CONTRASTEXT_NUM_CPUS       logical CPUs (default: cores + 2, as contrastext.runtime sizes a local Ray)
#   CONTRASTEXT_VENV           environment whose python runs the jobs (default: .venv of the repository)
#   RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH   use this token instead of ~/.ray/auth_token
#
# How Ray 2.60 token auth behaves (checked against the installed Ray):
#   * `ray start --head` turns token auth on when RAY_AUTH_MODE=token, or when RAY_AUTH_MODE is unset
#     and a token exists (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token); with no token and
#     no mode it starts WITHOUT auth (a warning). RAY_AUTH_MODE=token and no token: it refuses to start.
#   * `ray get-auth-token --generate` creates ~/.ray/auth_token if missing and prints the token.
#   * Clients send the token only when THEIR RAY_AUTH_MODE is "token": `ray job submit`, `ray status`,
#     `ray.init(address=...)`, worker `ray start --address` all fail against an auth-enabled cluster
#     without it, even when ~/.ray/auth_token exists (only ray.init() / "auto" finds it by itself).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
auth_mode=token
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-auth) auth_mode=disabled ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "start.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

user="$(id -un 2>/dev/null || echo user)"
ray_dir="${CONTRASTEXT_RAY_DIR:-/tmp/ray-contrastext-$user}"
num_cpus="${CONTRASTEXT_NUM_CPUS:-$(( $(nproc 2>/dev/null || echo 2) + 2 ))}"
# Clients use the loopback address and the dashboard binds only there; the GCS still listens on all
# interfaces (Ray 2.60 does so even with --node-ip-address=127.0.0.1), one more reason for the token.
host=127.0.0.1
env_file="$ray_dir/env.sh"

# Jobs run `python ...` with the PATH of the Ray processes: put the project's environment first, or
# the entrypoint finds a python without ray ("ModuleNotFoundError: No module named 'ray'").
venv="${CONTRASTEXT_VENV:-$root/.venv}"
if [ -z "${VIRTUAL_ENV:-}" ] && [ -x "$venv/bin/ray" ]; then
  export PATH="$venv/bin:$PATH"
  export VIRTUAL_ENV="$venv"
fi
command -v ray >/dev/null || { echo "start.sh: no 'ray' on PATH; run scripts/setup.sh first" >&2; exit 1; }
py="$(dirname "$(command -v ray)")/python"
[ -x "$py" ] || py=python3

# Any HTTP answer (200, or 401 when auth is on) means the dashboard is serving.
dashboard_up() {
  "$py" - "$dash_url/api/version" <<'PY'
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=2)
except urllib.error.HTTPError:
    pass
except Exception:
    sys.exit(1)
PY
}

print_usage() {
  # shellcheck disable=SC1090
  . "$env_file"
  cat <<EOF

Ray head is up: GCS $RAY_ADDRESS, dashboard $dash_url, token auth: $RAY_AUTH_MODE
Logs: $ray_dir/session_latest/logs

In every shell that talks to this cluster (sets RAY_AUTH_MODE, RAY_ADDRESS, RAY_API_SERVER_ADDRESS):
  source $env_file

Then, from the repository root:
  ray job submit --working-dir . -- python jobs/contrastive_fit.py
  ray job list
  ray status
  python -c 'import ray; ray.init(); print(ray.cluster_resources())'

The same without the env file:
EOF
  if [ "$RAY_AUTH_MODE" = token ]; then
    cat <<EOF
  RAY_AUTH_MODE=token ray job submit --address $dash_url --working-dir . -- python jobs/contrastive_fit.py
Token: ${RAY_AUTH_TOKEN_PATH:-~/.ray/auth_token} (print it with: ray get-auth-token).
The dashboard page asks for it once; for curl: -H "Authorization: Bearer \$(ray get-auth-token 2>/dev/null)".
EOF
  else
    cat <<EOF
  ray job submit --address $dash_url --working-dir . -- python jobs/contrastive_fit.py
No authentication: anyone who can reach its ports can run code on this cluster.
EOF
  fi
  echo "Stop it with: cluster/local/stop.sh"
}

# A port given in the environment is used as is (ray start fails if it is taken); a default port that
# is taken (another Ray on this machine, e.g. a test session's ray.init()) is replaced by a free one.
pick_port() {  # pick_port VALUE_FROM_ENV DEFAULT
  if [ -n "$1" ]; then echo "$1"; return; fi
  "$py" - "$2" <<'PY'
import socket, sys
def free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is not "taken"
        try:
            s.bind(("", port))
        except OSError:
            return None
        return s.getsockname()[1]
print(free(int(sys.argv[1])) or free(0))
PY
}

ours_running() {  # the GCS of this directory is alive
  [ "$(ps -ww -eo args= | grep -F -- "--session-dir=$ray_dir/" | grep -c gcs_server)" -gt 0 ]
}

if [ -f "$env_file" ] && ours_running; then
  # shellcheck disable=SC1090
  dash_url="$(. "$env_file"; echo "$RAY_API_SERVER_ADDRESS")"
  echo "start.sh: a Ray head started by this script is already running ($ray_dir)."
  print_usage
  exit 0
fi

gcs_port="$(pick_port "${CONTRASTEXT_RAY_PORT:-}" 6379)"
dash_port="$(pick_port "${CONTRASTEXT_DASHBOARD_PORT:-}" 8265)"
client_port="$(pick_port "${CONTRASTEXT_CLIENT_PORT:-}" 10001)"
# The dashboard agent (it runs submitted jobs) gets a free port unless told: its default 52365 is the
# one every other Ray on the machine (each test session's ray.init()) races for.
agent_port="$(pick_port "${CONTRASTEXT_AGENT_PORT:-}" 0)"
dash_url="http://$host:$dash_port"

mkdir -p "$ray_dir"
export RAY_AUTH_MODE="$auth_mode"
if [ "$auth_mode" = token ]; then
  if [ -n "${RAY_AUTH_TOKEN_PATH:-}" ] && [ ! -s "$RAY_AUTH_TOKEN_PATH" ]; then
    echo "start.sh: RAY_AUTH_TOKEN_PATH=$RAY_AUTH_TOKEN_PATH is empty or missing" >&2
    exit 1
  fi
  # Uses RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH when set; else creates ~/.ray/auth_token when missing.
  ray get-auth-token --generate >/dev/null 2>&1 || {
    echo "start.sh: 'ray get-auth-token --generate' failed" >&2; exit 1; }
  if [ -z "${RAY_AUTH_TOKEN:-}" ] && [ -z "${RAY_AUTH_TOKEN_PATH:-}" ]; then
    chmod 600 "$HOME/.ray/auth_token"  # Ray writes it world-readable
  fi
fi

# Offline by default: the models the jobs use come from installed packages or local paths.
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"

echo "start.sh: starting a Ray head on $host ($num_cpus CPUs, auth: $auth_mode, dir $ray_dir)"
ray start --head \
  --node-ip-address="$host" --port="$gcs_port" \
  --dashboard-host="$host" --dashboard-port="$dash_port" \
  --ray-client-server-port="$client_port" --dashboard-agent-listen-port="$agent_port" \
  --num-cpus="$num_cpus" \
  --temp-dir="$ray_dir" \
  --disable-usage-stats \
  ${extra[@]+"${extra[@]}"}

{
  echo "# Written by cluster/local/start.sh: source it to talk to the local Ray head."
  echo "export RAY_AUTH_MODE=$auth_mode"
  [ -n "${RAY_AUTH_TOKEN_PATH:-}" ] && echo "export RAY_AUTH_TOKEN_PATH=$RAY_AUTH_TOKEN_PATH"
  echo "export RAY_ADDRESS=$host:$gcs_port"
  echo "export RAY_API_SERVER_ADDRESS=$dash_url"
  echo "export CONTRASTEXT_RAY_DIR=$ray_dir"
} > "$env_file"
if [ -n "${RAY_AUTH_TOKEN:-}" ]; then
  echo "start.sh: the token came from RAY_AUTH_TOKEN; clients need it in their environment too." >&2
fi

for _ in $(seq 60); do
  dashboard_up && break
  sleep 1
done
dashboard_up || { echo "start.sh: the dashboard did not answer at $dash_url; see $ray_dir/session_latest/logs" >&2; exit 1; }
# Two Rays on one host can collide on the agent's port: the cluster then looks healthy, but every
# submission fails with "No available agent to submit job". Wait for the agent to listen.
agent_log="$ray_dir/session_latest/logs/dashboard_agent.log"
agent_ok=""
for _ in $(seq 40); do
  grep -q "failed to bind after" "$agent_log" 2>/dev/null && break
  if "$py" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' \
      "$agent_port" 2>/dev/null; then agent_ok=1; break; fi
  sleep 0.5
done
if [ -z "$agent_ok" ]; then
  echo "start.sh: WARNING: the dashboard agent is not listening on port $agent_port (taken by another Ray?);" \
       "job submission will fail. See $agent_log; stop.sh, then start again." >&2
fi
print_usage
