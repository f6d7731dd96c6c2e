#!/usr/bin/env bash
# Packs a root file system into an OCI image tarball, without a container engine: the one way
# this repository makes images (ferro-ipam's own in build.sh; the e2e node's pause image and the
# in-cluster provider's image in the node e2e test of migration).
#
#   pack.sh OUT.tar NAME:TAG ROOTFS [crane mutate flags: --entrypoint, --user, --label ...]
#
# ROOTFS becomes one layer, the same bytes for the same inputs (sorted, no timestamps, owned by
# root). go-containerregistry's crane (built from the Go module proxy by e2e/tools/go-tool.sh)
# makes the image on a registry it serves on loopback for the duration, with this machine's
# platform set (containerd unpacks no image without one). OUT.tar is both an OCI image layout
# (index.json, blobs/) and a docker archive (manifest.json), the form `docker save` writes:
# `docker load`, `podman load`, `ctr images import` and `crane push` take it. The image's digest
# is printed on stdout.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'pack: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ $# -ge 3 ] || die "usage: pack.sh OUT.tar NAME:TAG ROOTFS [crane mutate flags...]"
tarball=$1 name=$2 rootfs=$3
shift 3
[ -d "$rootfs" ] || die "$rootfs is not a directory"
case "$(uname -m)" in
  x86_64) platform=linux/amd64 ;;
  aarch64) platform=linux/arm64 ;;
  *) die "no OCI platform name for $(uname -m)" ;;
esac
crane=$(bash "$root/e2e/tools/go-tool.sh" crane | tail -1)

work=$(mktemp -d)
registry_pid=
cleanup() {
  [ -z "$registry_pid" ] || kill "$registry_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$rootfs" -cf "$work/layer.tar" .

# The registry binds a port the kernel picks (no collision with another run or another
# server on this machine) and names it in its first log line; a loaded machine may take seconds.
"$crane" registry serve --address 127.0.0.1:0 >"$work/registry.log" 2>&1 &
registry_pid=$!
port=
for _ in $(seq 300); do
  port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$work/registry.log" | head -1)
  [ -z "$port" ] || break
  kill -0 "$registry_pid" 2>/dev/null || die "crane's registry exited: $(cat "$work/registry.log")"
  sleep 0.1
done
[ -n "$port" ] || die "crane's registry named no port within 30 s: $(cat "$work/registry.log")"
for _ in $(seq 300); do
  "$crane" catalog "127.0.0.1:$port" --insecure >/dev/null 2>&1 && break
  sleep 0.1
done
ref=127.0.0.1:$port/image:${name##*:}
"$crane" append --insecure --oci-empty-base -f "$work/layer.tar" -t "$ref" >/dev/null 2>>"$work/crane.log" ||
  die "crane append failed: $(cat "$work/crane.log")"
"$crane" mutate --insecure "$ref" -t "$ref" --set-platform "$platform" "$@" >/dev/null 2>>"$work/crane.log" ||
  die "crane mutate failed: $(cat "$work/crane.log")"
"$crane" pull --insecure --format oci "$ref" "$work/layout" 2>>"$work/crane.log" ||
  die "crane pull failed: $(cat "$work/crane.log")"

# The layout crane wrote, with an index naming the image and a docker-archive manifest beside it.
manifest=$("$crane" manifest --insecure "$ref")
digest=$("$crane" digest --insecure "$ref")
mapfile -t blobs < <(grep -o '"digest":"sha256:[0-9a-f]*"' <<<"$manifest" | cut -d'"' -f4 | sed 's/^sha256://')
[ "${#blobs[@]}" -ge 2 ] || die "unexpected manifest: $manifest"
cat >"$work/layout/index.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"$digest","size":${#manifest},"annotations":{"io.containerd.image.name":"$name","org.opencontainers.image.ref.name":"${name##*:}"}}]}
JSON
layers=$(printf '"blobs/sha256/%s",' "${blobs[@]:1}")
cat >"$work/layout/manifest.json" <<JSON
[{"Config":"blobs/sha256/${blobs[0]}","RepoTags":["$name"],"Layers":[${layers%,}]}]
JSON
mkdir -p "$(dirname "$tarball")"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work/layout" -cf "$tarball" oci-layout index.json manifest.json blobs
log "$name ($platform) $digest: $(du -h "$tarball" | cut -f1), $(du -sh "$rootfs" | cut -f1) unpacked"
echo "$digest"
