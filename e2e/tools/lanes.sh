#!/usr/bin/env bash
# Runs `make` lanes side by side: each lane's targets one after another, the lanes at once.
#
#   e2e/tools/lanes.sh NAME=TARGETS... [NAME=TARGETS...]
#   e2e/tools/lanes.sh node="test-node" plane="e2e test-faults"
#
# A lane runs all its targets even when one fails (make --keep-going), so one failure does not
# hide the others. Its output goes to target/lanes/NAME.log, each line stamped with the time,
# printed whole when the lane ends, so two lanes' lines never interleave; while they run, one
# line a minute says which are still going. The exit status is 1 when any lane failed, and each
# failed lane is named at the end.
# LANES_SERIAL=1 runs the same lanes one after another (to tell a flake of running side by side
# from a plain failure).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
logs=$root/target/lanes
mkdir -p "$logs"
make=${MAKE:-make}

[ $# -gt 0 ] || { echo "usage: $0 NAME=TARGETS... [NAME=TARGETS...]" >&2; exit 2; }

names=() pids=()
declare -A started status

# Each line of a lane's log starts with the time it was written (HH:MM:SS), so that the log
# shows when each test ended and how long the one before took.
stamp() {
  local line
  while IFS= read -r line; do printf '%(%H:%M:%S)T %s\n' -1 "$line"; done
}

run_lane() {
  local name=$1 targets=$2
  # shellcheck disable=SC2086 # TARGETS is a list of make targets
  LANE=$name $make --keep-going --no-print-directory -C "$root" $targets 2>&1 | stamp >"$logs/$name.log"
}

report() {
  local name=$1 rc=$2
  status[$name]=$rc
  echo "==> lane $name: $([ "$rc" = 0 ] && echo passed || echo "FAILED (exit $rc)") after $(($(date +%s) - started[$name]))s; its output:"
  sed 's/^/    /' "$logs/$name.log"
}

for lane in "$@"; do
  name=${lane%%=*} targets=${lane#*=}
  [ -n "$name" ] && [ "$name" != "$lane" ] || { echo "lane '$lane' is not NAME=TARGETS" >&2; exit 2; }
  names+=("$name")
  started[$name]=$(date +%s)
  if [ "${LANES_SERIAL:-0}" = 1 ]; then
    echo "==> lane $name: make $targets (serial)"
    rc=0; run_lane "$name" "$targets" || rc=$?
    report "$name" "$rc"
    continue
  fi
  echo "==> lane $name: make $targets (output in target/lanes/$name.log)"
  run_lane "$name" "$targets" &
  pids+=($!)
done

if [ "${LANES_SERIAL:-0}" != 1 ]; then
  # Report each lane as it ends, in the order they end; a line a minute while any runs.
  remaining=${#pids[@]} ticks=0
  while [ "$remaining" -gt 0 ]; do
    sleep 5
    ticks=$((ticks + 1))
    running=()
    for i in "${!pids[@]}"; do
      name=${names[$i]}
      [ -z "${status[$name]:-}" ] || continue
      if kill -0 "${pids[$i]}" 2>/dev/null; then
        running+=("$name")
        continue
      fi
      rc=0; wait "${pids[$i]}" || rc=$?
      report "$name" "$rc"
      remaining=$((remaining - 1))
    done
    if [ "$remaining" -gt 0 ] && [ $((ticks % 12)) = 0 ]; then
      echo "==> lanes still running: ${running[*]}"
    fi
  done
fi

failed=()
for name in "${names[@]}"; do
  [ "${status[$name]}" = 0 ] || failed+=("$name")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "==> lanes failed: ${failed[*]}"
  exit 1
fi
