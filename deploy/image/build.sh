#!/usr/bin/env bash
# `make image`: ferro-ipam's OCI image, assembled without a container engine.
#
# The root file system holds the release binary, exactly the shared libraries it loads (as ldd
# lists them, each at its path), /etc/passwd and /etc/group with the non-root user 65532, and the
# host's CA certificates. pack.sh beside this script turns it into an image with the entrypoint,
# user and labels, written as one tarball that is both an OCI image layout and a docker archive:
# `docker load`, `podman load`, `ctr images import` and `crane push` take it.
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

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

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
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
name="$repository:$version"
mkdir -p "$out"
tarball="$out/ferro-ipam-$version.tar"
digest=$(bash "$root/deploy/image/pack.sh" "$tarball" "$name" "$rootfs" \
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
  --label org.opencontainers.image.licenses=Apache-2.0)
echo "$digest" >"$out/ferro-ipam-$version.digest"
log "$name $digest"
log "libraries: $(tr '\n' ' ' <"$work/libraries")"
echo "$tarball"
