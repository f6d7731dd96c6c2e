#!/usr/bin/env bash
# `make dist`: the files of a release, in dist/, each the same bytes when run twice from one
# commit with one binary (RELEASING.md publishes them; docs/install-from-release.md installs them).
#
#   ferro-ipam-image-vX.Y.Z.tar     the OCI image (deploy/image/build.sh), .digest its digest
#   ipam-components.yaml            for clusterctl, the image by digest; metadata.yaml beside it
#   install.yaml                    `kubectl kustomize deploy/` with the image by digest
#   ferro-ipam-X.Y.Z.tgz            the Helm chart, its default image by digest
#   ferro-ipam-linux-<arch>         the CLI and controller binary, stripped
#   ferro-ipam.cdx.json             a CycloneDX SBOM of the Rust dependencies
#   SHA256SUMS                      over every other file
#
# Environment: VERSION (default: Cargo.toml's; another fails), DIST_DIR (default dist/),
# DIST_ALLOW_DIRTY=1 (build from a tree with changes; tests only), FERRO_IPAM_BIN (default
# release/ferro-ipam under CARGO_TARGET_DIR, else under target/), IMAGE_REPOSITORY (default
# ghcr.io/ferro-ipam/ferro-ipam).
# Every time written comes from SOURCE_DATE_EPOCH, the commit's time.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'dist: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The [package] version of the root Cargo.toml.
cargo_version() {
  awk '/^\[/ { section = $0 } section == "[package]" && $1 == "version" { gsub(/"/, "", $3); print $3; exit }' \
    "$root/Cargo.toml"
}

# VERSION, when given, must be Cargo.toml's: the binary reports that one.
check_version() {
  local wanted=${VERSION:-} declared
  declared=$(cargo_version)
  [ -n "$declared" ] || die "no [package] version in $root/Cargo.toml"
  wanted=${wanted#v}
  if [ -n "$wanted" ] && [ "$wanted" != "$declared" ]; then
    die "VERSION=$wanted but Cargo.toml says $declared: bump the version in Cargo.toml (and everywhere tests/version_in_step.rs checks) first"
  fi
  version=$declared
}

# A release is built from a commit: no changes, no untracked files.
check_clean_tree() {
  local changes
  changes=$(git -C "$root" status --porcelain)
  [ -n "$changes" ] || return 0
  if [ "${DIST_ALLOW_DIRTY:-0}" = 1 ]; then
    log "DIST_ALLOW_DIRTY=1: building from a tree with uncommitted changes ($(wc -l <<<"$changes") paths); not a release"
    return 0
  fi
  die "the tree has uncommitted changes (git status --porcelain):
$changes
commit or remove them first: a release is built from a commit"
}

check_binary() {
  [ -x "$binary" ] || die "$binary is missing: run \`make release\` first"
  local reported
  reported=$("$binary" --version | awk '{ print $2 }')
  [ "$reported" = "$version" ] || die "$binary reports version $reported, Cargo.toml $version: run \`make release\` again"
}

platform_arch() {
  case "$(uname -m)" in
    x86_64) echo amd64 ;;
    aarch64) echo arm64 ;;
    *) die "no release name for the architecture $(uname -m)" ;;
  esac
}

# The image, by the one recipe the tests use; its tarball and digest copied under release names.
build_image() {
  local image_dir=$work/image
  IMAGE_DIR=$image_dir IMAGE_REPOSITORY=$repository FERRO_IPAM_BIN=$binary \
    bash "$root/deploy/image/build.sh" >/dev/null 2>"$work/image.log" ||
    die "deploy/image/build.sh failed: $(cat "$work/image.log")"
  cp "$image_dir/ferro-ipam-v$version.tar" "$out/ferro-ipam-image-v$version.tar"
  cp "$image_dir/ferro-ipam-v$version.digest" "$out/ferro-ipam-image-v$version.digest"
  digest=$(cat "$out/ferro-ipam-image-v$version.digest")
  [[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] || die "deploy/image/build.sh wrote no digest: $digest"
}

# install.yaml: what `kubectl apply -k deploy/` installs, the image named by digest.
render_install() {
  local overlay=$work/install
  mkdir -p "$overlay"
  # kustomize takes no absolute path as a resource.
  cat >"$overlay/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$overlay" "$root/deploy")
images:
  - name: ghcr.io/ferro-ipam/ferro-ipam
    newName: $repository
    digest: $digest
YAML
  "$kubectl" kustomize "$overlay" >"$out/install.yaml" || die "kubectl kustomize of deploy/ failed"
  grep -q "image: $repository@$digest\$" "$out/install.yaml" || die "install.yaml does not name $repository@$digest"
}

# ipam-components.yaml: deploy/clusterctl's build, FERRO_IPAM_IMAGE's default by digest.
render_components() {
  local tagged="\${FERRO_IPAM_IMAGE:=ghcr.io/ferro-ipam/ferro-ipam:v$version}"
  local pinned="\${FERRO_IPAM_IMAGE:=$repository@$digest}"
  "$kubectl" kustomize "$root/deploy/clusterctl" >"$work/components.yaml" || die "kubectl kustomize of deploy/clusterctl failed"
  [ "$(grep -cF "$tagged" "$work/components.yaml")" = 1 ] ||
    die "deploy/clusterctl does not default FERRO_IPAM_IMAGE to ghcr.io/ferro-ipam/ferro-ipam:v$version once"
  awk -v tagged="$tagged" -v pinned="$pinned" '{ at = index($0, tagged); if (at) $0 = substr($0, 1, at - 1) pinned substr($0, at + length(tagged)); print }' \
    "$work/components.yaml" >"$out/ipam-components.yaml"
}

# metadata.yaml, once it has a release series for this major.minor.
copy_metadata() {
  local major=${version%%.*} minor
  minor=${version#*.}
  minor=${minor%%.*}
  awk -v major="$major" -v minor="$minor" '
    $1 == "-" && $2 == "major:" { m = $3 } $1 == "major:" { m = $2 }
    $1 == "minor:" && m == major && $2 == minor { found = 1 }
    END { exit !found }' "$root/metadata.yaml" ||
    die "metadata.yaml has no release series $major.$minor: add it (with its contract) first"
  cp "$root/metadata.yaml" "$out/metadata.yaml"
}

# The chart, from a copy whose values name the image by digest, repacked without helm's times.
package_chart() {
  local chart=$work/chart/ferro-ipam unpacked=$work/chart-unpacked
  mkdir -p "$work/chart" "$unpacked"
  cp -R "$root/deploy/chart" "$chart"
  sed -i -e "s|^  digest: \"\"\$|  digest: \"$digest\"|" -e "s|^  repository: ghcr.io/ferro-ipam/ferro-ipam\$|  repository: $repository|" \
    "$chart/values.yaml"
  grep -q "^  digest: \"$digest\"\$" "$chart/values.yaml" || die "deploy/chart/values.yaml has no empty image.digest to set"
  "$helm" package --version "$version" --app-version "v$version" -d "$work/chart-out" "$chart" >"$work/helm.log" 2>&1 ||
    die "helm package failed: $(cat "$work/helm.log")"
  tar -xzmf "$work/chart-out/ferro-ipam-$version.tgz" -C "$unpacked"
  deterministic_tar "$unpacked" ferro-ipam | gzip -n -9 >"$out/ferro-ipam-$version.tgz"
}

# A tar of DIR's ENTRY: sorted, owned by root, every time SOURCE_DATE_EPOCH.
deterministic_tar() {
  tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    --mode='u+rwX,go+rX,go-w' --format=ustar -C "$1" -cf - "$2"
}

# The SBOM: cargo-cyclonedx writes one per workspace member, beside its Cargo.toml; the root
# crate's is ferro-ipam's (the binary), the others are the e2e harness's and heap-trim's.
write_sbom() {
  local cyclonedx name=ferro-ipam.cdx
  cyclonedx=$(bash "$root/deploy/dist/cargo-tool.sh" cargo-cyclonedx | tail -1)/bin/cargo-cyclonedx
  "$cyclonedx" cyclonedx --manifest-path "$root/Cargo.toml" --format json --spec-version 1.5 \
    --override-filename "$name" --quiet >"$work/sbom.log" 2>&1 || die "cargo-cyclonedx failed: $(cat "$work/sbom.log")"
  # Its references to the workspace's own crates name the checkout's path: made relative, the
  # SBOM is the same from any checkout of the commit.
  sed "s|\"path+file://$root\([/#]\)|\"path+file://.\1|g" "$root/$name.json" >"$out/$name.json"
  rm -f "$root/$name.json" "$root/e2e/$name.json" "$root/crates/heap-trim/$name.json"
  ! grep -qF "$root" "$out/$name.json" || die "$name.json still names the checkout $root"
}

copy_binary() {
  local arch
  arch=$(platform_arch)
  strip --strip-all -o "$out/ferro-ipam-linux-$arch" "$binary"
}

write_sums() {
  (cd "$out" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs sha256sum) \
    >"$work/SHA256SUMS"
  mv "$work/SHA256SUMS" "$out/SHA256SUMS"
}

main() {
  local started=$SECONDS
  check_version
  check_clean_tree
  binary=${FERRO_IPAM_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/ferro-ipam}
  repository=${IMAGE_REPOSITORY:-ghcr.io/ferro-ipam/ferro-ipam}
  out=${DIST_DIR:-$root/dist}
  case "$(realpath -m "$out")" in
    / | "$root" | "$HOME") die "DIST_DIR=$out: dist.sh empties that directory; name one of its own" ;;
  esac
  check_binary
  SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct)
  export SOURCE_DATE_EPOCH
  kubectl=$(bash "$root/e2e/tools/build.sh" | tail -1)/bin/kubectl
  helm=$(bash "$root/e2e/tools/go-tool.sh" helm | tail -1)
  [ -x "$kubectl" ] && [ -x "$helm" ] || die "kubectl or helm did not build: run \`make tools install-tools\`"

  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  rm -rf "$out"
  mkdir -p "$out"
  build_image
  render_install
  render_components
  copy_metadata
  package_chart
  copy_binary
  write_sbom
  write_sums
  log "v$version ($digest) in $out, in $((SECONDS - started))s:"
  (cd "$out" && ls -l | tail -n +2 | awk '{ printf "  %10d  %s\n", $5, $9 }') >&2
}

main "$@"
