#!/usr/bin/env bash
# Copies the CRDs of the Cluster API release pinned in this directory's go.mod (the last whose
# IPAddressClaim and IPAddress are v1beta1 only) into a cache directory keyed by that version,
# once, and prints the directory as the last line of stdout.
#   FERRO_IPAM_E2E_CAPI=v1beta1 makes the e2e control plane install these instead of the
#   current release's CRDs (see e2e/src/plane.rs and `make test-contract-v1beta1`).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=$(sed -n 's#^require sigs.k8s.io/cluster-api \(v[^ ]*\)$#\1#p' "$here/go.mod")
[ -n "$version" ] || { echo "fetch.sh: no version of sigs.k8s.io/cluster-api in $here/go.mod" >&2; exit 1; }
dir="${FERRO_IPAM_CACHE:-$HOME/.cache/ferro-ipam}/capi-crds-$version"
stamp=$(cat "$here/go.mod" "$here/go.sum" | sha256sum)
if [ ! -f "$dir/.complete" ] || [ "$(cat "$dir/.complete")" != "$stamp" ]; then
  mkdir -p "$(dirname "$dir")"
  tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  bash "$here/../capi-crds/copy-crds.sh" "$tmp" "$here"
  echo "$stamp" > "$tmp/.complete"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  trap - EXIT
  echo "fetch.sh: Cluster API $version CRDs copied to $dir" >&2
fi
echo "$dir"
