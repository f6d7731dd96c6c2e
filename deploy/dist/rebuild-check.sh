#!/usr/bin/env bash
# The release binary built a second time, from a copy of this tree in another directory with a
# target directory of its own and none of the first build's compiled objects (nothing shared but
# the toolchain and Cargo's download cache), must be the same bytes as the first: `make dist`
# then gives the same image digest and SHA256SUMS wherever it runs (test-dist shows the rest of
# dist/ is a function of the binary).
#
#   deploy/dist/rebuild-check.sh    (after `make release`)
#
# The copy holds the files git knows plus untracked ones it does not ignore, as they are on disk,
# so uncommitted changes are compared too. It is removed afterwards; REBUILD_KEEP=1 keeps it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'rebuild-check: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

first=${FERRO_IPAM_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/ferro-ipam}
[ -x "$first" ] || die "$first is missing: run \`make release\` first"
work=${REBUILD_DIR:-$root/target/rebuild}
rm -rf "$work"
mkdir -p "$work/src"
second_cache=
cleanup() {
  [ -z "$second_cache" ] || bash "$root/e2e/tools/compile-cache.sh" stop second >&2
  [ "${REBUILD_KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' file; do [ -e "$file" ] && printf '%s\0' "$file"; done \
  | tar --null -T - -cf -) | tar -xf - -C "$work/src"
log "building a second time in $work/src (target $work/target)"
# Never the first build's compiler cache: its objects would make the second build a copy of the
# first. Under `make test`, whose builds go through compile-cache.sh's main cache, this one goes
# through the second cache, whose objects were only ever compiled here.
case "${RUSTC_WRAPPER:-}" in
  */sccache-*/bin/sccache) second_cache=$(bash "$root/e2e/tools/compile-cache.sh" start second) ;;
esac
# shellcheck disable=SC2086 # second_cache is a list of VAR=VALUE
env RUSTC_WRAPPER= SCCACHE_SERVER_PORT= SCCACHE_DIR= $second_cache CARGO_TARGET_DIR="$work/target" bash "$work/src/deploy/dist/release-build.sh" --quiet --bin ferro-ipam
second=$work/target/release/ferro-ipam

a=$(sha256sum <"$first" | cut -d' ' -f1)
b=$(sha256sum <"$second" | cut -d' ' -f1)
if [ "$a" = "$b" ]; then
  log "the same binary from two builds in two directories: sha256 $a ($(stat -c %s "$first") bytes)"
  exit 0
fi
log "the two builds differ: $first ($a) and $second ($b)"
# Name the ELF sections the differing bytes fall in.
python3 - "$first" "$second" >&2 <<'PY' || true
import subprocess, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
sections = []
for line in subprocess.run(["readelf", "-S", "-W", sys.argv[1]], capture_output=True, text=True).stdout.splitlines():
    fields = line.replace("[", " ").replace("]", " ").split()
    if len(fields) >= 6 and fields[0].isdigit() and fields[1].startswith("."):
        sections.append((fields[1], int(fields[4], 16), int(fields[5], 16)))
hits = {}
for i in range(min(len(a), len(b))):
    if a[i] != b[i]:
        name = next((n for n, off, size in sections if off <= i < off + size), "outside any section")
        hits[name] = hits.get(name, 0) + 1
if len(a) != len(b):
    print(f"  sizes differ: {len(a)} and {len(b)} bytes")
for name, count in sorted(hits.items()):
    print(f"  {name}: {count} bytes differ")
PY
die "the release build is not reproducible (see the sections above; the usual cause is a path or a time written into the binary)"
