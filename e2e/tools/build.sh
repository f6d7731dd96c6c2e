#!/usr/bin/env bash
# Builds the local control plane the e2e tests run against -- kube-apiserver,
# kubectl and etcd from the Go module proxy -- and copies Cluster API's CRDs,
# into a cache directory outside the clone. It also builds the peer the
# migration test and the benchmark run side by side with ferro-ipam: the
# in-cluster IPAM provider (bin/in-cluster-ipam), with its pool CRDs. Prints
# that directory as the LAST line of stdout; progress goes to stderr:
#
#   dir=$(e2e/tools/build.sh | tail -1)
#   "$dir/bin/kube-apiserver" ...   "$dir/bin/etcd" ...   "$dir/bin/kubectl" ...
#   "$dir/crds/"*.yaml   "$dir/bin/in-cluster-ipam" ...   "$dir/in-cluster-crds/"*.yaml
#
# Cache: ${FERRO_IPAM_CACHE:-$HOME/.cache/ferro-ipam}/k8s-<v>-etcd-<v>-<go version>/
# A directory counts only if its .complete marker (written last) matches the
# pinned inputs; otherwise everything is rebuilt in a temporary directory that
# is renamed into place, so an interrupted build never looks complete.
# FERRO_IPAM_REBUILD=1 forces a rebuild. Needs only Go (and coreutils).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { printf 'build.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
now_ms() { date +%s%3N; }
# step NAME CMD...: runs CMD with its stdout sent to stderr and logs its duration.
step() {
  local name=$1 t0 t1
  shift
  log "$name ..."
  t0=$(now_ms)
  "$@" >&2 || die "$name failed"
  t1=$(now_ms)
  log "$name done in $(( (t1 - t0) / 1000 )).$(( (t1 - t0) % 1000 / 100 ))s"
}

command -v go >/dev/null || die "go is not on PATH"

# shellcheck source=cache.sh
. "$here/cache.sh"
# Pinned versions come from the wrapper modules' go.mod files.
k8s_version=$(mod_version "$here/kube/go.mod" k8s.io/kubernetes)
etcd_version=$(mod_version "$here/etcd/go.mod" go.etcd.io/etcd/server/v3)
capi_version=$(mod_version "$here/capi-crds/go.mod" sigs.k8s.io/cluster-api)
in_cluster_version=$(mod_version "$here/in-cluster/go.mod" sigs.k8s.io/cluster-api-ipam-provider-in-cluster)
[ -n "$k8s_version" ] || die "no k8s.io/kubernetes version in $here/kube/go.mod"
[ -n "$etcd_version" ] || die "no go.etcd.io/etcd/server/v3 version in $here/etcd/go.mod"
[ -n "$capi_version" ] || die "no sigs.k8s.io/cluster-api version in $here/capi-crds/go.mod"
[ -n "$in_cluster_version" ] ||
  die "no sigs.k8s.io/cluster-api-ipam-provider-in-cluster version in $here/in-cluster/go.mod"
# Run inside the module so a GOTOOLCHAIN switch is reflected in the key.
go_version=$(cd "$here/kube" && go env GOVERSION)

key="k8s-$k8s_version-etcd-$etcd_version-$go_version"
# Everything that changes the output but not the directory name goes into the
# stamp (CAPI and in-cluster versions, exact module sums, this script's flags).
build_flags_version=2
stamp=$(
  echo "k8s=$k8s_version etcd=$etcd_version capi=$capi_version in-cluster=$in_cluster_version go=$go_version flags=$build_flags_version"
  cd "$here" && cat kube/go.mod kube/go.sum etcd/go.mod etcd/go.sum capi-crds/go.mod capi-crds/go.sum \
    in-cluster/go.mod in-cluster/go.sum | sha256sum
)
files=(bin/kube-apiserver bin/kubectl bin/etcd bin/in-cluster-ipam
  crds/ipam.cluster.x-k8s.io_ipaddressclaims.yaml
  crds/ipam.cluster.x-k8s.io_ipaddresses.yaml
  crds/cluster.x-k8s.io_clusters.yaml
  in-cluster-crds/ipam.cluster.x-k8s.io_inclusterippools.yaml
  in-cluster-crds/ipam.cluster.x-k8s.io_globalinclusterippools.yaml
  in-cluster-crds/ipam.cluster.x-k8s.io_inclusterprefixpools.yaml
  in-cluster-crds/ipam.cluster.x-k8s.io_globalinclusterprefixpools.yaml)

cache_enter "$key" "$stamp" "${files[@]}"

log "building $key (Kubernetes $k8s_version, etcd $etcd_version, Cluster API $capi_version CRDs, in-cluster IPAM provider $in_cluster_version) into $dir"
log "a cold build fetches ~1.2 GB of modules, fills ~4.3 GB of Go build cache, writes ~250 MB of binaries (~5.7 GB in all) and takes 8-14 minutes on 2 cores"
mkdir -p "$tmp/bin" "$tmp/crds" "$tmp/in-cluster-crds"
t_start=$(now_ms)

export CGO_ENABLED=0
k8s_ldflags=$(kube_ldflags "$k8s_version")
go_download() { (cd "$here/$1" && go mod download); }
go_build() { # go_build MODULE_DIR OUTPUT PACKAGE LDFLAGS
  (cd "$here/$1" && go build -trimpath -buildvcs=false -ldflags "$4" -o "$2" "$3")
}

step "download modules (kube)" go_download kube
step "download modules (etcd)" go_download etcd
step "download modules (in-cluster)" go_download in-cluster
step "build kube-apiserver" go_build kube "$tmp/bin/kube-apiserver" ./cmd/kube-apiserver "$k8s_ldflags"
step "build kubectl" go_build kube "$tmp/bin/kubectl" ./cmd/kubectl "$k8s_ldflags"
step "build etcd" go_build etcd "$tmp/bin/etcd" . "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$etcd_version"
# The in-cluster provider's main package is its module's root, which no wrapper can import;
# in-cluster/go.mod names it in a `tool` directive instead, so it is built by import path
# from within the wrapper, with the dependency versions upstream pins.
step "build in-cluster-ipam" go_build in-cluster "$tmp/bin/in-cluster-ipam" \
  sigs.k8s.io/cluster-api-ipam-provider-in-cluster "-s -w"
step "copy Cluster API $capi_version CRDs" "$here/capi-crds/copy-crds.sh" "$tmp/crds"
step "copy in-cluster $in_cluster_version pool CRDs" "$here/in-cluster/copy-crds.sh" "$tmp/in-cluster-crds"

# Smoke check before the directory may count as complete. (Output is captured
# first: with pipefail, `cmd | grep -q` fails when grep exits early and cmd gets SIGPIPE.)
out=$("$tmp/bin/kube-apiserver" --version) && [ "$out" = "Kubernetes $k8s_version" ] ||
  die "kube-apiserver --version is not $k8s_version: $out"
out=$("$tmp/bin/kubectl" version --client) && [[ $out == *"Client Version: $k8s_version"* ]] ||
  die "kubectl version is not $k8s_version: $out"
out=$("$tmp/bin/etcd" --version) && [[ $out == *"etcd Version: ${etcd_version#v}"* ]] ||
  die "etcd --version is not $etcd_version: $out"
# It has no version flag: check that it parses the flags the e2e harness passes.
out=$("$tmp/bin/in-cluster-ipam" --help 2>&1) && [[ $out == *--watch-filter* && $out == *--diagnostics-address* ]] ||
  die "in-cluster-ipam --help does not list the expected flags: $out"
cache_commit
log "done in $(( ($(now_ms) - t_start) / 1000 ))s: $(du -sh "$dir" | cut -f1) in $dir"
for f in bin/kube-apiserver bin/kubectl bin/etcd bin/in-cluster-ipam; do log "  $f $(du -h "$dir/$f" | cut -f1)"; done
echo "$dir"
