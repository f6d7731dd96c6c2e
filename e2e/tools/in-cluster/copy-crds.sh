#!/usr/bin/env bash
# Copies the in-cluster IPAM provider's pool CRD manifests (the kustomize bases,
# unchanged) out of the sigs.k8s.io/cluster-api-ipam-provider-in-cluster module
# pinned in go.mod, fetched through the Go module proxy and verified against
# go.sum. The e2e tests install them to run that provider as a peer (it also
# watches the two prefix-pool kinds, which ferro-ipam's crds/ do not define).
# The project commits no copy of them.
# Usage: copy-crds.sh DEST_DIR
set -euo pipefail
dest=${1:?usage: copy-crds.sh DEST_DIR}
here=$(cd "$(dirname "$0")" && pwd)
module=sigs.k8s.io/cluster-api-ipam-provider-in-cluster
version=$(awk -v m="$module" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")
[ -n "$version" ] || { echo "copy-crds.sh: no version of $module in $here/go.mod" >&2; exit 1; }
files=(
  config/crd/bases/ipam.cluster.x-k8s.io_inclusterippools.yaml
  config/crd/bases/ipam.cluster.x-k8s.io_globalinclusterippools.yaml
  config/crd/bases/ipam.cluster.x-k8s.io_inclusterprefixpools.yaml
  config/crd/bases/ipam.cluster.x-k8s.io_globalinclusterprefixpools.yaml
)
json=$(cd "$here" && go mod download -json "$module@$version") || {
  echo "copy-crds.sh: go mod download $module@$version failed:" >&2; echo "$json" >&2; exit 1; }
dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")
[ -d "$dir" ] || { echo "copy-crds.sh: no module directory in: $json" >&2; exit 1; }
mkdir -p "$dest"
for f in "${files[@]}"; do
  [ -f "$dir/$f" ] || { echo "copy-crds.sh: $module@$version has no $f" >&2; exit 1; }
  install -m 0644 "$dir/$f" "$dest/"
done
