#!/usr/bin/env bash
# Copies Cluster API's CRD manifests (the kustomize bases, unchanged) out of the
# sigs.k8s.io/cluster-api module pinned in go.mod, fetched through the Go module
# proxy and verified against go.sum. The project commits no copy of them.
# Usage: copy-crds.sh DEST_DIR [PIN_DIR]
# PIN_DIR holds the go.mod and go.sum that pin the release (default: this script's directory).
set -euo pipefail
dest=${1:?usage: copy-crds.sh DEST_DIR [PIN_DIR]}
here=$(cd "${2:-$(dirname "$0")}" && pwd)
module=sigs.k8s.io/cluster-api
version=$(sed -n "s#^require $module \(v[^ ]*\)\$#\1#p" "$here/go.mod")
[ -n "$version" ] || { echo "copy-crds.sh: no version of $module in $here/go.mod" >&2; exit 1; }
files=(
  ipam.cluster.x-k8s.io_ipaddressclaims.yaml
  ipam.cluster.x-k8s.io_ipaddresses.yaml
  cluster.x-k8s.io_clusters.yaml
)
json=$(cd "$here" && go mod download -json "$module@$version") || {
  echo "copy-crds.sh: go mod download $module@$version failed:" >&2; echo "$json" >&2; exit 1; }
dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")
[ -d "$dir" ] || { echo "copy-crds.sh: no module directory in: $json" >&2; exit 1; }
mkdir -p "$dest"
# Releases since 1.11 keep the core CRDs under core/, older ones at the top.
for f in "${files[@]}"; do
  found=""
  for base in core/config/crd/bases config/crd/bases; do
    [ -f "$dir/$base/$f" ] && { found="$dir/$base/$f"; break; }
  done
  [ -n "$found" ] || { echo "copy-crds.sh: $module@$version has no $f" >&2; exit 1; }
  install -m 0644 "$found" "$dest/"
done
