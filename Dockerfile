# ferro-ipam's image for a container engine, by the recipe of `make image` (deploy/image/build.sh,
# which the tests run): the glibc binary that `make release` builds (with the same script), on an empty base, with
# exactly the shared libraries it loads, the non-root user 65532 and Debian's CA bundle, all put
# in place by deploy/image/rootfs.sh. The configuration below is build.sh's, field for field;
# deploy/image/check-dockerfile.py (run by `make test-dist`) fails when the two drift.
#
#   docker build --build-arg REVISION=$(git rev-parse HEAD) -t ghcr.io/ferro-ipam/ferro-ipam:v0.1.0 .
#
# Needs BuildKit (Docker 23 or later) for the cache mounts. The build needs only this repository.

# Debian 12 (bookworm), the release `make image` runs on: the same glibc, loader and CA bundle.
# The digest is the one a public BuildKit log showed for rust:1.95-bookworm; it was not checked
# against the registry from here (no registry access). Check it with
# `crane digest rust:1.95-bookworm` before a release, and update the tag and digest together.
FROM rust:1.95-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    bash deploy/dist/release-build.sh --bin ferro-ipam \
    && bash deploy/image/rootfs.sh target/release/ferro-ipam /rootfs \
    && chroot /rootfs /usr/local/bin/ferro-ipam --version

FROM scratch
COPY --from=build /rootfs/ /
ARG VERSION=v0.1.0
ARG REVISION=unknown
USER 65532:65532
WORKDIR /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
EXPOSE 8443 9440
LABEL org.opencontainers.image.title=ferro-ipam \
      org.opencontainers.image.description="A Cluster API IPAM provider: in-cluster IP pools" \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${REVISION} \
      org.opencontainers.image.source=https://github.com/ferro-ipam/ferro-ipam \
      org.opencontainers.image.licenses=Apache-2.0
ENTRYPOINT ["/usr/local/bin/ferro-ipam"]
