#!/usr/bin/env bash
# The compiler cache of `make test`: sccache (deploy/dist/sccache.sh) in front of rustc, so that
# a clean clone compiles again only the crates that changed since the last run.
#
#   e2e/tools/compile-cache.sh start   starts sccache's server; prints the RUSTC_WRAPPER to use
#                                      (nothing when the cache is off)
#   e2e/tools/compile-cache.sh stop    prints the hits and misses, and stops the server
#
# Off when FERRO_IPAM_COMPILE_CACHE=0, or when RUSTC_WRAPPER is already set (a wrapper of your
# own is kept). The objects live in ${FERRO_IPAM_CACHE:-$HOME/.cache/ferro-ipam}/sccache-objects,
# at most 10 GiB, the oldest evicted first. Nothing of a build depends on it: a miss compiles
# as rustc alone would, and the reproducibility check builds without it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'compile-cache: %s\n' "$*" >&2; }

if [ "${FERRO_IPAM_COMPILE_CACHE:-1}" = 0 ] || [ -n "${RUSTC_WRAPPER:-}" ]; then
  exit 0
fi
sccache=$(bash "$root/deploy/dist/sccache.sh" | tail -1)/bin/sccache
export SCCACHE_DIR=${FERRO_IPAM_CACHE:-$HOME/.cache/ferro-ipam}/sccache-objects
export SCCACHE_CACHE_SIZE=10G
# A server left behind by an interrupted run stops by itself after ten idle minutes.
export SCCACHE_IDLE_TIMEOUT=600

case "${1:-}" in
  start)
    mkdir -p "$SCCACHE_DIR"
    # Its own stdio, so the server outlives no pipe of make's; a server already running is kept.
    "$sccache" --start-server </dev/null >/dev/null 2>&1 || true
    if ! "$sccache" --show-stats >/dev/null 2>&1; then
      log "sccache's server did not start; compiling without the cache"
      exit 0
    fi
    "$sccache" --zero-stats >/dev/null 2>&1 || true
    echo "$sccache"
    ;;
  stop)
    stats=$("$sccache" --show-stats 2>/dev/null || true)
    hits=$(awk '/^Cache hits  +[0-9]/ { print $3; exit }' <<<"$stats")
    misses=$(awk '/^Cache misses  +[0-9]/ { print $3; exit }' <<<"$stats")
    other=$(awk '/^Non-cacheable calls  +[0-9]/ { print $3; exit }' <<<"$stats")
    echo "==> compile cache: ${hits:-0} hits, ${misses:-0} misses, ${other:-0} not cacheable (binaries, build scripts, proc macros)"
    "$sccache" --stop-server >/dev/null 2>&1 || true
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
