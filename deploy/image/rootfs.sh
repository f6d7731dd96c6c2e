#!/usr/bin/env bash
# The root file system of ferro-ipam's image, the one recipe that `make image` (build.sh) and the
# Dockerfile's build stage both run:
#
#   rootfs.sh BINARY ROOTFS
#
# ROOTFS (created, must not exist) gets the binary, stripped, at /usr/local/bin/ferro-ipam;
# exactly the shared libraries it loads (glibc, its loader, libgcc_s: as ldd lists them, each at
# its path); /etc/passwd and /etc/group with the non-root user 65532; and the CA bundle of
# Debian's ca-certificates package. The libraries listed are printed on stdout, one a line.
set -euo pipefail

log() { printf 'rootfs: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ $# = 2 ] || die "usage: rootfs.sh BINARY ROOTFS"
binary=$1 rootfs=$2
certificates=/etc/ssl/certs/ca-certificates.crt
[ -x "$binary" ] || die "$binary is missing or not executable: run \`make release\` first"
[ ! -e "$rootfs" ] || die "$rootfs exists: name a directory that does not"
[ -s "$certificates" ] || die "$certificates is missing: install Debian's ca-certificates package"
for tool in ldd strip; do
  command -v "$tool" >/dev/null || die "$tool is not on PATH: install Debian's libc-bin and binutils packages"
done

install -D -m 0755 "$binary" "$rootfs/usr/local/bin/ferro-ipam"
strip --strip-all "$rootfs/usr/local/bin/ferro-ipam"
libraries=$(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
[ -n "$libraries" ] || die "ldd lists no library for $binary: the image is built around a glibc binary"
while read -r library; do
  install -D -m 0755 "$(readlink -f "$library")" "$rootfs$library"
done <<<"$libraries"
mkdir -p "$rootfs/etc/ssl/certs"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
install -m 0644 "$certificates" "$rootfs/etc/ssl/certs/ca-certificates.crt"
echo "$libraries"
