# syntax=docker/dockerfile:1
# ferro-ipam's image: a static (musl) binary on distroless/static, running as a non-root user.
#   docker build -t ghcr.io/ferro-ipam/ferro-ipam:v0.1.0 .
# The build needs only this repository; the e2e harness and its tools are not built.

ARG RUST_VERSION=1

FROM rust:${RUST_VERSION}-alpine AS build
# On Alpine, Rust targets musl and links statically; ring compiles a little C and assembly.
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
ENV CARGO_PROFILE_RELEASE_DEBUG=none \
    CARGO_PROFILE_RELEASE_STRIP=symbols
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p ferro-ipam --bin ferro-ipam \
    && install -D -m 0755 target/release/ferro-ipam /out/ferro-ipam
# Fails the build if the binary is not static or does not run.
RUN ! ldd /out/ferro-ipam 2>/dev/null | grep -q '=>' && /out/ferro-ipam --version

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ferro-ipam /usr/local/bin/ferro-ipam
# 65532 is distroless's "nonroot"; the Deployment also sets runAsNonRoot and this uid.
USER 65532:65532
EXPOSE 8443 9440
ENTRYPOINT ["/usr/local/bin/ferro-ipam"]
