#!/usr/bin/env bash
# `make test-dist`: checks two runs of `make dist` from one commit, with code of its own (none of
# dist.sh's, so that a mistake there is not repeated here):
#
#   check.sh FIRST_DIR SECOND_DIR
#
# - the two directories hold the same files, byte for byte (the differing ones are named);
# - SHA256SUMS lists every other file and `sha256sum -c` accepts it;
# - the image digest file names the image the tarball holds (index.json and the manifest blob);
# - the chart's Chart.yaml has version X.Y.Z and appVersion vX.Y.Z, its values that digest, and
#   its gzip header no time;
# - install.yaml and ipam-components.yaml name ferro-ipam's image by that digest only;
# - the binary reports X.Y.Z, the SBOM describes ferro-ipam X.Y.Z, metadata.yaml has X.Y.
set -euo pipefail

log() { printf 'check: %s\n' "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

[ $# = 2 ] && [ -d "$1" ] && [ -d "$2" ] || fail "usage: check.sh FIRST_DIR SECOND_DIR"
first=$1 second=$2

files_of() { (cd "$1" && find . -maxdepth 1 -type f -printf '%f\n' | LC_ALL=C sort); }

compare_runs() {
  local differing=() name
  [ "$(files_of "$first")" = "$(files_of "$second")" ] ||
    fail "the two runs wrote different files: $(diff <(files_of "$first") <(files_of "$second") | grep '^[<>]' | tr '\n' ' ')"
  cmp -s "$first/SHA256SUMS" "$second/SHA256SUMS" || differing+=(SHA256SUMS)
  while read -r name; do
    [ "$name" = SHA256SUMS ] || cmp -s "$first/$name" "$second/$name" || differing+=("$name")
  done < <(files_of "$first")
  [ ${#differing[@]} = 0 ] || fail "not reproducible, these files differ between the two runs: ${differing[*]}"
  log "the two runs are byte-identical ($(files_of "$first" | wc -l) files)"
}

check_sums() {
  local listed
  listed=$(awk '{ print $2 }' "$first/SHA256SUMS")
  [ "$listed" = "$(files_of "$first" | grep -vx SHA256SUMS)" ] ||
    fail "SHA256SUMS does not list every other file, sorted: $(tr '\n' ' ' <<<"$listed")"
  (cd "$first" && sha256sum --quiet -c SHA256SUMS) || fail "sha256sum -c SHA256SUMS failed"
}

# The version, from the image tarball's name: ferro-ipam-image-vX.Y.Z.tar.
find_version() {
  local tarballs
  tarballs=$(files_of "$first" | grep -E '^ferro-ipam-image-v[0-9]+\.[0-9]+\.[0-9]+\.tar$' || true)
  [ "$(wc -w <<<"$tarballs")" = 1 ] || fail "expected one ferro-ipam-image-vX.Y.Z.tar, found: $tarballs"
  version=${tarballs#ferro-ipam-image-v}
  version=${version%.tar}
}

check_image() {
  local tarball=$first/ferro-ipam-image-v$version.tar indexed blob
  digest=$(cat "$first/ferro-ipam-image-v$version.digest")
  [[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] || fail "ferro-ipam-image-v$version.digest holds no sha256 digest: $digest"
  indexed=$(tar -xOf "$tarball" index.json | grep -o '"digest":"sha256:[0-9a-f]*"' | cut -d'"' -f4)
  [ "$indexed" = "$digest" ] || fail "the tarball's index.json names $indexed, the digest file $digest"
  blob=$(tar -xOf "$tarball" "blobs/sha256/${digest#sha256:}" | sha256sum | cut -d' ' -f1)
  [ "sha256:$blob" = "$digest" ] || fail "the manifest blob of $digest hashes to sha256:$blob"
}

# FIELD's value on a line of its own, `FIELD: value` at the indent given (quotes dropped).
yaml_field() {
  sed -n "s/^$1: *//p" | tr -d "\"'" | head -1
}

check_chart() {
  local chart=$first/ferro-ipam-$version.tgz chart_yaml values
  [ -f "$chart" ] || fail "ferro-ipam-$version.tgz is missing"
  [ "$(od -An -tu4 -j4 -N4 "$chart" | tr -d ' ')" = 0 ] || fail "ferro-ipam-$version.tgz's gzip header holds a time"
  chart_yaml=$(tar -xzOf "$chart" ferro-ipam/Chart.yaml)
  values=$(tar -xzOf "$chart" ferro-ipam/values.yaml)
  [ "$(yaml_field version <<<"$chart_yaml")" = "$version" ] || fail "the chart's version is not $version: $chart_yaml"
  [ "$(yaml_field appVersion <<<"$chart_yaml")" = "v$version" ] || fail "the chart's appVersion is not v$version: $chart_yaml"
  [ "$(yaml_field '  digest' <<<"$values")" = "$digest" ] || fail "the chart's image.digest is not $digest"
}

# Every image of ferro-ipam a manifest names is REPOSITORY@DIGEST, and there is at least one.
check_manifest() {
  local file=$first/$1 images
  images=$(grep -E '^ +image: ' "$file" | sed -E 's/^ +image: //; s/^\$\{FERRO_IPAM_IMAGE:=(.*)\}$/\1/' | grep ferro-ipam || true)
  [ -n "$images" ] || fail "$1 names no ferro-ipam image"
  ! grep -v "@$digest\$" <<<"$images" || fail "$1 names ferro-ipam's image otherwise than by $digest"
}

check_rest() {
  local arch reported series
  arch=$(files_of "$first" | sed -n 's/^ferro-ipam-linux-//p')
  [ -n "$arch" ] || fail "no ferro-ipam-linux-<arch> binary"
  reported=$("$first/ferro-ipam-linux-$arch" --version)
  [ "$reported" = "ferro-ipam $version" ] || fail "the binary reports '$reported', not ferro-ipam $version"
  python3 - "$first/ferro-ipam.cdx.json" "$version" <<'PY' || fail "ferro-ipam.cdx.json does not describe ferro-ipam $version"
import json, sys
bom = json.load(open(sys.argv[1]))
component = bom["metadata"]["component"]
assert bom["bomFormat"] == "CycloneDX" and component["name"] == "ferro-ipam" and component["version"] == sys.argv[2]
assert len(bom["components"]) > 50, len(bom["components"])
PY
  series=$(tr -d ' ' <"$first/metadata.yaml" | awk -F: '$1 == "-major" { major = $2 } $1 == "minor" { print major "." $2 }')
  grep -qx "${version%.*}" <<<"$series" || fail "metadata.yaml has no release series ${version%.*}: $series"
}

compare_runs
check_sums
find_version
check_image
check_chart
check_manifest install.yaml
check_manifest ipam-components.yaml
check_rest
log "ok: v$version, image $digest"
