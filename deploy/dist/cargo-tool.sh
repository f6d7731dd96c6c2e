#!/usr/bin/env bash
# Installs one Rust tool that `make dist`, `make docs` or `make lint` uses from crates.io with `cargo install --locked` (the
# crate's own Cargo.lock), at the version pinned here, into a cache directory of its own, reused
# as the e2e tools are (e2e/tools/cache.sh):
#   ${FERRO_IPAM_CACHE:-$HOME/.cache/ferro-ipam}/<crate>-<version>/bin/<crate>
# Prints that directory as the LAST line of stdout; progress goes to stderr:
#
#   cyclonedx=$(deploy/dist/cargo-tool.sh cargo-cyclonedx | tail -1)/bin/cargo-cyclonedx
#   mdbook=$(deploy/dist/cargo-tool.sh mdbook | tail -1)/bin/mdbook
#   deny=$(deploy/dist/cargo-tool.sh cargo-deny | tail -1)/bin/cargo-deny
#
# FERRO_IPAM_REBUILD=1 forces a rebuild. Needs only cargo.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'cargo-tool.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

crate=${1:-}
case "$crate" in
  # CycloneDX's own generator; it honours SOURCE_DATE_EPOCH (its timestamp, no random serial).
  cargo-cyclonedx) version=0.5.9; features=() ;;
  # The book's builder; without its live-reload server, which `make docs` does not use.
  mdbook) version=0.5.4; features=(--no-default-features --features search) ;;
  # The dependency policy of `make lint` (deny.toml): licences, bans, sources.
  cargo-deny) version=0.20.2; features=() ;;
  *) die "usage: cargo-tool.sh cargo-cyclonedx|mdbook|cargo-deny" ;;
esac
command -v cargo >/dev/null || die "cargo is not on PATH"

# shellcheck source=../../e2e/tools/cache.sh
. "$root/e2e/tools/cache.sh"
cache_enter "$crate-$version" "cargo install --locked $crate --version $version ${features[*]}" "bin/$crate"

log "building $crate $version into $dir (about 5 minutes on two cores) ..."
started=$(date +%s)
cargo install --locked "$crate" --version "$version" "${features[@]}" --root "$tmp" --target-dir "$tmp/target" >&2 ||
  die "cargo install $crate $version failed"
rm -rf "$tmp/target" "$tmp/.crates.toml" "$tmp/.crates2.json"
cache_commit
log "built $crate $version in $(( $(date +%s) - started ))s"
echo "$dir"
