#!/usr/bin/env bash
# Builds one Go tool that a test uses -- crane, helm or clusterctl -- from the Go module proxy,
# through the wrapper module e2e/tools/<name>/ (its go.mod pins the version with a `tool`
# directive, its go.sum the exact modules). The binary goes into a cache directory of its own,
#   ${FERRO_IPAM_CACHE:-$HOME/.cache/ferro-ipam}/<name>-<version>-<go version>/bin/<name>,
# built only when that directory is missing or its .complete stamp does not match the wrapper.
# Prints the binary's path as the LAST line of stdout; progress goes to stderr:
#
#   crane=$(e2e/tools/go-tool.sh crane | tail -1)
#
# It leaves e2e/tools/build.sh (kube-apiserver, etcd, kubectl) and its cache alone.
# FERRO_IPAM_REBUILD=1 forces a rebuild. Needs only Go (and coreutils).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf 'go-tool.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

name=${1:-}
case "$name" in
  crane) module=github.com/google/go-containerregistry ;;
  helm) module=helm.sh/helm/v3 ;;
  clusterctl) module=sigs.k8s.io/cluster-api ;;
  *) die "usage: go-tool.sh crane|helm|clusterctl" ;;
esac
wrapper="$here/$name"
command -v go >/dev/null || die "go is not on PATH"

tool=$(awk '$1 == "tool" { print $2; exit }' "$wrapper/go.mod")
version=$(awk -v m="$module" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$wrapper/go.mod")
[ -n "$tool" ] && [ -n "$version" ] || die "$wrapper/go.mod names no tool or no $module version"
go_version=$(cd "$wrapper" && go env GOVERSION)

# The version each tool reports (`crane version`, `helm version`, `clusterctl version`).
case "$name" in
  crane) ldflags="-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$version" ;;
  helm)
    # The Kubernetes version helm assumes when no cluster is asked (`helm template`), from the
    # client-go it is built with (v0.N -> 1.N), as helm's own Makefile sets it.
    k8s_minor=$(awk '$1 == "k8s.io/client-go" { split($2, v, "."); print v[2]; exit }' "$wrapper/go.mod")
    ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
    for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
      ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
    done
    ;;
  clusterctl) ldflags="-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=$version -X sigs.k8s.io/cluster-api/version.gitMajor=1" ;;
esac

cache_root=${FERRO_IPAM_CACHE:-$HOME/.cache/ferro-ipam}
key="$name-$version-$go_version"
dir="$cache_root/$key"
stamp=$(cat "$wrapper/go.mod" "$wrapper/go.sum" <(echo "$ldflags") | sha256sum | cut -d' ' -f1)

is_complete() {
  [ "${FERRO_IPAM_REBUILD:-0}" != 1 ] && [ -s "$dir/bin/$name" ] && [ "$(cat "$dir/.complete" 2>/dev/null)" = "$stamp" ]
}

if is_complete; then
  log "cache hit: $dir"
  echo "$dir/bin/$name"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.$key.lock"
if command -v flock >/dev/null; then
  flock -n 9 || { log "waiting for another build of $key ..."; flock 9; }
  if is_complete; then
    log "cache hit (built by another process): $dir"
    echo "$dir/bin/$name"
    exit 0
  fi
fi
rm -rf "$cache_root/.$key.tmp."*
tmp=$(mktemp -d "$cache_root/.$key.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

log "building $name $version with $go_version into $dir ..."
started=$(date +%s)
(cd "$wrapper" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/bin/$name" "$tool") >&2 ||
  die "building $name failed"
"$tmp/bin/$name" version >/dev/null 2>&1 || "$tmp/bin/$name" --help >/dev/null 2>&1 || die "$name does not run"
printf '%s\n' "$stamp" >"$tmp/.complete"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
log "built $name $version in $(( $(date +%s) - started ))s ($(du -h "$dir/bin/$name" | cut -f1))"
echo "$dir/bin/$name"
