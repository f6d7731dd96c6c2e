#!/usr/bin/env bash
# `cargo build --release --locked ARGS...`, with every path the compiler would write into the
# binary (this checkout, the target directory, Cargo's registry) remapped to a fixed name, so that
# the binary's bytes depend on the sources and the toolchain alone, not on where they were built.
# Without it, the paths in the line tables change the GNU build ID, which `strip` keeps: two
# checkouts in two directories would give two image digests. `make release`, `make bench` and
# deploy/dist/rebuild-check.sh build through here.
#
#   deploy/dist/release-build.sh --bin ferro-ipam
#
# Environment: CARGO (default cargo), CARGO_TARGET_DIR, CARGO_HOME, RUSTFLAGS (kept; the remaps
# are appended).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
case "$target" in /*) ;; *) target=$root/$target ;; esac
cargo_home=${CARGO_HOME:-$HOME/.cargo}

# rustc applies the last prefix that matches, so the target directory (often inside the
# checkout) comes after the checkout.
remaps="--remap-path-prefix=$root=/ferro-ipam --remap-path-prefix=$target=/target --remap-path-prefix=$cargo_home=/cargo"
cd "$root"
RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }$remaps" exec "${CARGO:-cargo}" build --release --locked "$@"
