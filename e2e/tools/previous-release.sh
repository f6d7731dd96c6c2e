#!/usr/bin/env bash
# The previous release's files, for the node's upgrade scenarios (e2e/tests/node/release_upgrade.rs):
# the commit in previous-release/COMMIT (a commit on main), built as the version in
# previous-release/VERSION (earlier than Cargo.toml's) by that commit's own deploy/dist/dist.sh.
# The result is cached, keyed by the commit and the version:
#   ${FERRO_IPAM_CACHE:-$HOME/.cache/ferro-ipam}/previous-dist-<commit>-<version>/
# Prints that directory as the LAST line of stdout; progress goes to stderr:
#
#   previous=$(e2e/tools/previous-release.sh | tail -1)
#
# On a miss: `git archive` of the commit into a temporary directory; its version set in every
# file tests/version_in_step.rs ties to Cargo.toml; committed there (at the commit's own time, so
# its dist.sh sees a clean tree and the same SOURCE_DATE_EPOCH); `cargo build --release --locked`
# in a target directory of its own; its dist.sh. The checkout and its target are removed after.
# Nothing of this checkout's target is reused: `make release` builds with RUSTFLAGS that name
# this checkout's paths (deploy/dist/release-build.sh), so no fingerprint of it would match.
# FERRO_IPAM_REBUILD=1 forces a rebuild.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
log() { printf 'previous-release.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

commit=$(tr -d '[:space:]' <"$here/previous-release/COMMIT")
version=$(tr -d '[:space:]' <"$here/previous-release/VERSION")
[[ $commit =~ ^[0-9a-f]{40}$ ]] || die "previous-release/COMMIT holds no full commit hash: $commit"
git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null ||
  die "commit $commit is not in this clone: fetch main's history (git fetch --unshallow origin main)"

# shellcheck source=cache.sh
. "$here/cache.sh"
cache_enter "previous-dist-${commit:0:12}-$version" "$commit $version dist.sh" \
  install.yaml ipam-components.yaml metadata.yaml "ferro-ipam-$version.tgz" \
  "ferro-ipam-image-v$version.tar" "ferro-ipam-image-v$version.digest" SHA256SUMS

work=$(mktemp -d)
trap 'rm -rf "$tmp" "$work"' EXIT
source=$work/source
started=$(date +%s)

# The commit's files, its version set to $version where its version-in-step test looks.
checkout() {
  local old
  mkdir -p "$source"
  git -C "$root" archive "$commit" | tar -x -C "$source"
  old=$(awk '/^\[/ { s = $0 } s == "[package]" && $1 == "version" { gsub(/"/, "", $3); print $3; exit }' "$source/Cargo.toml")
  [ -n "$old" ] || die "$commit's Cargo.toml has no [package] version"
  log "$commit is version $old; building it as $version"
  set_version "$old" Cargo.toml '^version = "OLD"$' 'version = "NEW"' 1
  # Cargo.lock: only the entry of the package ferro-ipam.
  awk -v old="$old" -v new="$version" '
    prev == "name = \"ferro-ipam\"" && $0 == "version = \"" old "\"" { $0 = "version = \"" new "\""; n++ }
    { prev = $0; print } END { if (n != 1) exit 1 }' "$source/Cargo.lock" >"$work/Cargo.lock" ||
    die "$commit's Cargo.lock has no ferro-ipam $old entry"
  mv "$work/Cargo.lock" "$source/Cargo.lock"
  set_version "$old" deploy/base/kustomization.yaml 'newTag: vOLD$' 'newTag: vNEW' 1
  set_version "$old" deploy/chart/Chart.yaml '^version: OLD$' 'version: NEW' 1
  set_version "$old" deploy/chart/Chart.yaml '^appVersion: vOLD$' 'appVersion: vNEW' 1
  set_version "$old" deploy/chart/files/manifests.yaml 'ferro-ipam:vOLD$' 'ferro-ipam:vNEW' 1
  set_version "$old" deploy/clusterctl/kustomization.yaml 'ferro-ipam:vOLD}$' 'ferro-ipam:vNEW}' 1
  set_version "$old" deploy/clusterctl/ipam-components.yaml 'ferro-ipam:vOLD}$' 'ferro-ipam:vNEW}' 1
}

# set_version OLD FILE PATTERN REPLACEMENT COUNT: PATTERN (OLD and NEW stand for the versions)
# replaced by REPLACEMENT on exactly COUNT lines of FILE.
set_version() {
  local old=${1//./\\.} file=$source/$2 pattern=$3 replacement=$4 count=$5 found
  pattern=${pattern//OLD/$old}
  replacement=${replacement//NEW/$version}
  found=$(grep -c -- "$pattern" "$file" || true)
  [ "$found" = "$count" ] || die "$2 of $commit: $count line(s) matching $pattern expected, $found found"
  sed -i "s|$pattern|$replacement|" "$file"
}

# A repository of one commit, dated as $commit, so that dist.sh finds a clean tree and its time.
commit_source() {
  local date
  date=$(git -C "$root" log -1 --format=%cI "$commit")
  git -C "$source" init -q
  git -C "$source" add -A
  GIT_AUTHOR_DATE=$date GIT_COMMITTER_DATE=$date git -C "$source" -c user.name=ferro-ipam \
    -c user.email=ferro-ipam@localhost commit -q -m "ferro-ipam $version (from $commit)"
}

# The release binary, in its own target.
build_binary() {
  log "cargo build --release --locked (its own target) ..."
  (cd "$source" && CARGO_TARGET_DIR=$work/target cargo build --release --locked --bin ferro-ipam) >&2 ||
    die "cargo build of $commit failed"
  local reported
  reported=$("$work/target/release/ferro-ipam" --version | awk '{ print $2 }')
  [ "$reported" = "$version" ] || die "the binary built from $commit reports $reported, not $version"
}

checkout
commit_source
build_binary
log "its deploy/dist/dist.sh ..."
FERRO_IPAM_BIN=$work/target/release/ferro-ipam DIST_DIR=$tmp bash "$source/deploy/dist/dist.sh" >&2 ||
  die "dist.sh of $commit failed"
cache_commit
rm -rf "$work" # cache_commit dropped the EXIT trap
log "built the dist of $commit as v$version in $(($(date +%s) - started))s"
echo "$dir"
