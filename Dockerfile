# syntax=docker/dockerfile:1.7
#
# kumaco's container image: a static binary on distroless, non-root, for linux/amd64 and
# linux/arm64.
#
#   docker build -t kumaco:0.1.0 .            # or: podman build, buildah bud
#   docker build --build-arg RUST_VERSION=1.95 -t kumaco:dev .
#
# - Static: the build stage's own architecture's musl target (x86_64- or
#   aarch64-unknown-linux-musl), so `docker buildx build --platform linux/arm64` builds the
#   arm64 image under emulation with no cross toolchain. TLS is rustls with ring (kube's
#   `rustls-tls` and `ring` features), so there is no OpenSSL to link or to patch.
# - Time zones are compiled into the binary (jiff's bundled tzdb): the image needs no
#   /usr/share/zoneinfo (distroless ships Debian's, which `--tzdata=system` reads). CA certificates come from distroless (kumaco itself trusts the
#   cluster CA from the kubeconfig or the mounted ServiceAccount).
# - Non-root (uid/gid 65532, distroless's `nonroot`), nothing written at run time, so the
#   Deployment runs it with readOnlyRootFilesystem and all capabilities dropped.
#
# The build stage uses BuildKit cache mounts for the cargo registry and target directory,
# so a rebuild after a source change recompiles only kumaco.
#
# Where no registry is reachable (CI), `make image` builds the same layout without
# pulling anything: a static glibc binary built on the host (crt-static,
# hack/build-static.sh) and the host's CA bundle, in a context directory of their own, on
# `scratch`; `make dist` does the same for both platforms (arm64 cross-compiled) into one
# multi-arch manifest list:
#
#   podman build --build-arg BINARY=prebuilt --build-arg BASE=scratch \
#     -f Dockerfile -t docker.io/library/kumaco:0.1.0 target/image/context
#
# Either way the image holds /usr/local/bin/kumaco and /etc/ssl/certs/ca-certificates.crt
# and runs as 65532:65532; tests/deploy_image.rs checks that and runs it as a Pod would.

ARG RUST_VERSION=1.95
# BINARY: the stage kumaco comes from, `build` (compiled here) or `prebuilt` (from the
# context). BASE: the runtime base image. Both defaults are the published path.
ARG BINARY=build
ARG BASE=gcr.io/distroless/static-debian12:nonroot

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
# musl-tools provides musl-gcc, which ring's build script needs to compile its C and
# assembly parts for the musl target.
RUN apt-get update \
    && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/* \
    && rustup target add "$(uname -m)-unknown-linux-musl"
# (Linking needs nothing extra: Rust's musl target brings its own C runtime.)
ENV CARGO_INCREMENTAL=0
WORKDIR /src
# The whole workspace is needed for cargo to read the manifest (testkit is a member and
# the benches are declared targets), but only the kumaco binary is built: testkit, the
# Go test programs and the benches are never compiled here.
COPY . .
# The last line fails the build if the binary is not static (a dependency pulling in a
# dynamic library would make the distroless image fail at start-up).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    target="$(uname -m)-unknown-linux-musl" \
    && export "CC_$(uname -m)_unknown_linux_musl=musl-gcc" \
    && cargo build --profile dist --locked --target "$target" --bin kumaco \
    && mkdir -p /out/usr/local/bin /out/etc/ssl/certs \
    && cp "target/$target/dist/kumaco" /out/usr/local/bin/kumaco \
    && ! ldd /out/usr/local/bin/kumaco 2>/dev/null | grep -q '=>' \
    && cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/

# The context holds `kumaco` (static, checked by `make image`) and `ca-certificates.crt`.
FROM scratch AS prebuilt
COPY kumaco /out/usr/local/bin/kumaco
COPY ca-certificates.crt /out/etc/ssl/certs/ca-certificates.crt

FROM ${BINARY} AS binary

FROM ${BASE}
LABEL org.opencontainers.image.title="kumaco" \
      org.opencontainers.image.description="Kubernetes Maintenance Controller: maintenance windows as ConfigMaps, node conditions as the answer" \
      org.opencontainers.image.licenses="Apache-2.0"
# The binary and a CA bundle (distroless has one too; scratch has none).
COPY --from=binary /out/ /
# Numeric, so that Kubernetes' runAsNonRoot check can verify it without /etc/passwd
# (scratch has none).
USER 65532:65532
# 8080: /metrics, 8081: /healthz and /readyz (kumaco run's defaults).
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/kumaco"]
CMD ["run"]
