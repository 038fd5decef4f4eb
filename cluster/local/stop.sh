#!/usr/bin/env bash
# Stop the local Ray head started by cluster/local/start.sh, and only that one: the processes that
# belong to its directory (CONTRASTEXT_RAY_DIR) and its Ray Client server, with all their children
# (workers, job drivers). Other Ray clusters on the machine (a colleague's, a test session's
# ray.init()) are left alone, unlike `ray stop`, which ends every Ray process of the user.
#
#   cluster/local/stop.sh          # like `ray stop`: raylet, then the rest, then the GCS; SIGKILL after 8 s each
#   cluster/local/stop.sh --all    # `ray stop --force`: every Ray process of this user on this machine
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
user="$(id -un 2>/dev/null || echo user)"
ray_dir="${CONTRASTEXT_RAY_DIR:-/tmp/ray-contrastext-$user}"
env_file="$ray_dir/env.sh"

if [ "${1:-}" = "--all" ]; then
  venv="${CONTRASTEXT_VENV:-$root/.venv}"
  [ -z "${VIRTUAL_ENV:-}" ] && [ -x "$venv/bin/ray" ] && export PATH="$venv/bin:$PATH"
  ray stop --force
  rm -f "$env_file"
  exit 0
fi

gcs_address=""
if [ -f "$env_file" ]; then
  gcs_address="$(sed -n 's/^export RAY_ADDRESS=//p' "$env_file")"
fi

# The Ray daemons whose command line names the Ray directory (gcs_server, raylet, dashboard, autoscaler
# monitor, log monitor) and the Ray Client server of this GCS port (it names no directory), each
# printed as "pid kind".
roots="$(ps -ww -eo pid=,args= | awk -v dir="$ray_dir" -v port="${gcs_address##*:}" '
  function names_dir(line) {
    return index(line, dir "/") || index(line, "=" dir " ") || substr(line, length(line) - length(dir)) == "=" dir
  }
  /\/raylet / && names_dir($0) { print $1, "raylet"; next }
  /\/gcs_server / && names_dir($0) { print $1, "gcs"; next }
  /dashboard\/dashboard\.py |autoscaler\/_private\/monitor\.py |_private\/log_monitor\.py / && names_dir($0) {
    print $1, "other"; next
  }
  port != "" && /ray\.util\.client\.server/ && $0 ~ ("--address=[^ ]*:" port " ") { print $1, "other" }
')"
if [ -z "$roots" ]; then
  echo "stop.sh: no Ray processes of $ray_dir are running."
  rm -f "$env_file"
  exit 0
fi

with_descendants() {  # PIDS... -> the PIDs and all their descendants (workers, job drivers, ...)
  local pids="$*" more
  while :; do
    more="$(ps -eo pid=,ppid= | awk -v list=" $pids " '
      index(list, " " $2 " ") && !index(list, " " $1 " ") { print $1 }')"
    [ -z "$more" ] && break
    pids="$pids $(echo $more)"
  done
  echo "$pids"
}

alive() {  # PIDS... -> those still running (a zombie waiting for its parent counts as gone)
  local p state
  for p in "$@"; do
    state="$(ps -o stat= -p "$p" 2>/dev/null || true)"
    case "$state" in ""|Z*) ;; *) echo "$p" ;; esac
  done
}

stop_group() {  # stop_group PIDS...: SIGTERM, wait up to 8 s, then SIGKILL
  [ $# -eq 0 ] && return 0
  kill -TERM "$@" 2>/dev/null || true
  local left
  for _ in $(seq 16); do
    left="$(alive "$@")"
    [ -z "$left" ] && return 0
    sleep 0.5
  done
  echo "stop.sh: SIGKILL for what ignored SIGTERM: $(echo $left)"
  kill -KILL $left 2>/dev/null || true
}

echo "stop.sh: stopping the Ray head in $ray_dir"
# The order of `ray stop`: the raylet (and its workers) first, the GCS last.
# shellcheck disable=SC2046
stop_group $(with_descendants $(echo "$roots" | awk '$2 == "raylet" { print $1 }'))
# shellcheck disable=SC2046
stop_group $(with_descendants $(echo "$roots" | awk '$2 == "other" { print $1 }'))
# shellcheck disable=SC2046
stop_group $(echo "$roots" | awk '$2 == "gcs" { print $1 }')
rm -f "$env_file"
echo "stop.sh: stopped."
