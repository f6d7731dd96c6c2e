#!/usr/bin/env bash
# `make image`: ferro-ipam's OCI image, assembled without a container engine.
#
# The root file system holds the release binary, exactly the shared libraries it loads (as ldd
# lists them, each at its path), /etc/passwd and /etc/group with the non-root user 65532, and the
# host's CA certificates. go-containerregistry's crane (built from the Go module proxy by
# e2e/tools/go-tool.sh) turns that layer into an image with the entrypoint, user and labels, on a
# registry it serves on loopback for the duration; the result is written as one tarball that is
# both an OCI image layout (index.json, blobs/) and a docker archive (manifest.json), the form
# `docker save` writes: `docker load`, `podman load` and `crane push` take it.
#
#   deploy/image/build.sh    -> target/image/ferro-ipam-<version>.tar, its digest in .digest
#
# Environment: FERRO_IPAM_BIN (default target/release/ferro-ipam), IMAGE_REPOSITORY (default
# ghcr.io/ferro-ipam/ferro-ipam), IMAGE_DIR (default target/image).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

binary=${FERRO_IPAM_BIN:-$root/target/release/ferro-ipam}
repository=${IMAGE_REPOSITORY:-ghcr.io/ferro-ipam/ferro-ipam}
out=${IMAGE_DIR:-$root/target/image}
certificates=/etc/ssl/certs/ca-certificates.crt
[ -x "$binary" ] || die "$binary is missing: run \`make release\` first"
[ -s "$certificates" ] || die "$certificates is missing: install Debian's ca-certificates package"
version=v$("$binary" --version | awk '{ print $2 }')
arch=$(uname -m)
case "$arch" in
  x86_64) platform=linux/amd64 ;;
  aarch64) platform=linux/arm64 ;;
  *) die "no OCI platform name for $arch" ;;
esac
crane=$(bash "$root/e2e/tools/go-tool.sh" crane | tail -1)

work=$(mktemp -d)
registry_pid=
cleanup() {
  [ -z "$registry_pid" ] || kill "$registry_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The root file system.
rootfs=$work/rootfs
install -D -m 0755 "$binary" "$rootfs/usr/local/bin/ferro-ipam"
strip --strip-all "$rootfs/usr/local/bin/ferro-ipam"
ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u >"$work/libraries"
[ -s "$work/libraries" ] || die "ldd lists no library for $binary"
while read -r library; do
  install -D -m 0755 "$(readlink -f "$library")" "$rootfs$library"
done <"$work/libraries"
mkdir -p "$rootfs/etc/ssl/certs"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
install -m 0644 "$certificates" "$rootfs/etc/ssl/certs/ca-certificates.crt"
# One layer, the same bytes for the same inputs: sorted, no timestamps, owned by root.
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$rootfs" -cf "$work/layer.tar" .

# crane builds on a registry of its own, on loopback.
port=$((20000 + RANDOM % 20000))
"$crane" registry serve --address "127.0.0.1:$port" >"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 50); do
  "$crane" catalog "127.0.0.1:$port" --insecure >/dev/null 2>&1 && break
  sleep 0.1
done
ref=127.0.0.1:$port/ferro-ipam:$version
"$crane" append --insecure --oci-empty-base -f "$work/layer.tar" -t "$ref" >/dev/null 2>>"$work/crane.log"
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
"$crane" mutate --insecure "$ref" -t "$ref" \
  --set-platform "$platform" \
  --entrypoint /usr/local/bin/ferro-ipam \
  --user 65532:65532 \
  --workdir / \
  --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --exposed-ports 8443/tcp,9440/tcp \
  --label org.opencontainers.image.title=ferro-ipam \
  --label "org.opencontainers.image.description=A Cluster API IPAM provider: in-cluster IP pools" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  --label org.opencontainers.image.source=https://github.com/ferro-ipam/ferro-ipam \
  --label org.opencontainers.image.licenses=Apache-2.0 >/dev/null 2>>"$work/crane.log"
"$crane" pull --insecure --format oci "$ref" "$work/layout" 2>>"$work/crane.log"

# The layout crane wrote, with an index naming the image and a docker-archive manifest beside it.
manifest=$("$crane" manifest --insecure "$ref")
digest=$("$crane" digest --insecure "$ref")
mapfile -t blobs < <(grep -o '"digest":"sha256:[0-9a-f]*"' <<<"$manifest" | cut -d'"' -f4 | sed 's/^sha256://')
[ "${#blobs[@]}" -ge 2 ] || die "unexpected manifest: $manifest"
name="$repository:$version"
cat >"$work/layout/index.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"$digest","size":${#manifest},"annotations":{"io.containerd.image.name":"$name","org.opencontainers.image.ref.name":"$version"}}]}
JSON
layers=$(printf '"blobs/sha256/%s",' "${blobs[@]:1}")
cat >"$work/layout/manifest.json" <<JSON
[{"Config":"blobs/sha256/${blobs[0]}","RepoTags":["$name"],"Layers":[${layers%,}]}]
JSON
mkdir -p "$out"
tarball="$out/ferro-ipam-$version.tar"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work/layout" -cf "$tarball" oci-layout index.json manifest.json blobs
echo "$digest" >"$out/ferro-ipam-$version.digest"
compressed=$(du -cb "$work"/layout/blobs/sha256/* | tail -1 | cut -f1)
log "$name ($platform) $digest: $(du -h "$tarball" | cut -f1) tarball, $((compressed / 1024)) KiB of blobs, $(du -sh "$rootfs" | cut -f1) unpacked"
log "libraries: $(tr '\n' ' ' <"$work/libraries")"
echo "$tarball"
