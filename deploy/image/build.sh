#!/usr/bin/env bash
# `make image`: ferro-ipam's OCI image, assembled without a container engine.
#
# The root file system is rootfs.sh's (the release binary, exactly the shared libraries it loads,
# /etc/passwd and /etc/group with the non-root user 65532, the host's CA certificates); the
# Dockerfile runs the same script in a Debian build stage of the host's release and sets the same
# configuration, which check-dockerfile.py holds it to. pack.sh beside this script turns the root
# file system into an image with the entrypoint, user and labels, written as one tarball that is
# both an OCI image layout and a docker archive: `docker load`, `podman load`, `ctr images import`
# and `crane push` take it.
#
#   deploy/image/build.sh    -> target/image/ferro-ipam-<version>.tar, its digest in .digest
#
# Environment: FERRO_IPAM_BIN (default release/ferro-ipam under CARGO_TARGET_DIR, else under
# target/), IMAGE_REPOSITORY (default
# ghcr.io/ferro-ipam/ferro-ipam), IMAGE_DIR (default target/image).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

binary=${FERRO_IPAM_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/ferro-ipam}
repository=${IMAGE_REPOSITORY:-ghcr.io/ferro-ipam/ferro-ipam}
out=${IMAGE_DIR:-$root/target/image}
[ -x "$binary" ] || die "$binary is missing: run \`make release\` first"
version=v$("$binary" --version | awk '{ print $2 }')

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The root file system, by the recipe the Dockerfile runs too.
rootfs=$work/rootfs
bash "$root/deploy/image/rootfs.sh" "$binary" "$rootfs" >"$work/libraries"
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
name="$repository:$version"
mkdir -p "$out"
tarball="$out/ferro-ipam-$version.tar"
digest=$(bash "$root/deploy/image/pack.sh" "$tarball" "$name" "$rootfs" \
  --entrypoint /usr/local/bin/ferro-ipam \
  --user 65532:65532 \
  --workdir / \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
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
