#!/usr/bin/env bash
# Builds the e2e node -- what turns the bare control plane into a cluster that runs pods -- from
# the Go module proxy, into a cache directory outside the clone:
#
#   bin/kubelet kube-controller-manager kube-scheduler kube-proxy   (node/kube, same Kubernetes
#                                                                   version as kube-apiserver)
#   bin/containerd ctr containerd-shim-runc-v2                      (node/containerd)
#   bin/runc                                                        (node/runc; cgo, libseccomp)
#   cni/bridge host-local loopback portmap                          (node/cni)
#   images/pause.tar                                                (node/pause: the sandbox image)
#
# Prints that directory as the LAST line of stdout; progress goes to stderr:
#
#   dir=$(e2e/tools/node/build.sh | tail -1)
#
# Cache: ${FERRO_IPAM_CACHE:-$HOME/.cache/ferro-ipam}/node-k8s-<v>-containerd-<v>-runc-<v>-cni-<v>-<go>/
# The directory counts only if its .complete stamp matches every wrapper's go.mod and go.sum
# (see ../cache.sh). FERRO_IPAM_REBUILD=1 forces a rebuild. Needs Go, gcc and libseccomp's headers (Debian: libseccomp-dev; `make
# node-packages` installs them with the other packages the node needs at run time).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tools=$(cd "$here/.." && pwd)

log() { printf 'node/build.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
step() {
  local name=$1 t0
  shift
  log "$name ..."
  t0=$(date +%s)
  "$@" >&2 || die "$name failed"
  log "$name done in $(( $(date +%s) - t0 ))s"
}
command -v go >/dev/null || die "go is not on PATH"

# shellcheck source=../cache.sh
. "$tools/cache.sh"
k8s_version=$(mod_version "$here/kube/go.mod" k8s.io/kubernetes)
control_plane_k8s=$(mod_version "$tools/kube/go.mod" k8s.io/kubernetes)
containerd_version=$(mod_version "$here/containerd/go.mod" github.com/containerd/containerd/v2)
runc_version=$(mod_version "$here/runc/go.mod" github.com/opencontainers/runc)
cni_version=$(mod_version "$here/cni/go.mod" github.com/containernetworking/plugins)
for v in k8s_version containerd_version runc_version cni_version; do
  [ -n "${!v}" ] || die "no $v in the wrappers' go.mod files"
done
[ "$k8s_version" = "$control_plane_k8s" ] ||
  die "the node's Kubernetes ($k8s_version) is not the control plane's ($control_plane_k8s): run kube/gen-gomod.sh for both"
go_version=$(cd "$here/kube" && go env GOVERSION)

key="node-k8s-$k8s_version-containerd-$containerd_version-runc-$runc_version-cni-$cni_version-$go_version"
build_flags_version=1
stamp=$(
  echo "flags=$build_flags_version"
  cd "$here" && cat kube/go.mod kube/go.sum containerd/go.mod containerd/go.sum runc/go.mod runc/go.sum \
    cni/go.mod cni/go.sum pause/go.mod pause/main.go | sha256sum
)
files=(bin/kubelet bin/kube-controller-manager bin/kube-scheduler bin/kube-proxy
  bin/containerd bin/ctr bin/containerd-shim-runc-v2 bin/runc bin/pause
  cni/bridge cni/host-local cni/loopback cni/portmap images/pause.tar)

cache_enter "$key" "$stamp" "${files[@]}"

[ -f /usr/include/seccomp.h ] || die "libseccomp's headers are missing (runc needs them): run \`make node-packages\` or apt-get install libseccomp-dev"
log "building $key into $dir (a cold build takes 10-15 minutes on 2 cores)"
mkdir -p "$tmp/bin" "$tmp/cni" "$tmp/images"
t_start=$(date +%s)

k8s_ldflags=$(kube_ldflags "$k8s_version")
build() { # build WRAPPER OUTPUT PACKAGE LDFLAGS [TAGS]
  (cd "$here/$1" && go build -trimpath -buildvcs=false -tags "${5:-}" -ldflags "$4" -o "$2" "$3")
}
static() { CGO_ENABLED=0 build "$@"; }
cgo() { CGO_ENABLED=1 build "$@"; }

containerd_ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version"
for component in containerd ctr containerd-shim-runc-v2; do
  # No btrfs, devmapper or zfs snapshotter: the node uses overlayfs (or native), and those
  # three would need cgo and their libraries' headers.
  step "build $component" static containerd "$tmp/bin/$component" \
    "github.com/containerd/containerd/v2/cmd/$component" "$containerd_ldflags" "no_btrfs no_devmapper no_zfs"
done
# runc filters system calls with libseccomp, through cgo, as its releases do.
step "build runc" cgo runc "$tmp/bin/runc" github.com/opencontainers/runc \
  "-s -w -X main.version=${runc_version#v}" "seccomp urfave_cli_no_docs"
for plugin in ipam/host-local main/bridge main/loopback meta/portmap; do
  step "build CNI ${plugin#*/}" static cni "$tmp/cni/${plugin#*/}" \
    "github.com/containernetworking/plugins/plugins/$plugin" "-s -w"
done
step "build pause" static pause "$tmp/bin/pause" . "-s -w"
install -D -m 0755 "$tmp/bin/pause" "$tmp/pause-rootfs/pause"
step "pack the pause image" bash "$tools/../../deploy/image/pack.sh" "$tmp/images/pause.tar" \
  ferro-ipam.local/pause:e2e "$tmp/pause-rootfs" --entrypoint /pause --user 65535:65535
rm -rf "$tmp/pause-rootfs"

# Last, so that the control plane's build (run first by `make tools`) has compiled the Kubernetes
# packages the two share.
for component in kubelet kube-controller-manager kube-scheduler kube-proxy; do
  step "build $component" static kube "$tmp/bin/$component" "./cmd/$component" "$k8s_ldflags"
done
out=$("$tmp/bin/kubelet" --version) && [ "$out" = "Kubernetes $k8s_version" ] || die "kubelet --version: $out"
out=$("$tmp/bin/containerd" --version) && [[ $out == *"$containerd_version"* ]] || die "containerd --version: $out"
out=$("$tmp/bin/runc" --version) && [[ $out == *seccomp* ]] || die "runc --version (no seccomp?): $out"
cache_commit
log "done in $(( $(date +%s) - t_start ))s: $(du -sh "$dir" | cut -f1) in $dir"
echo "$dir"
