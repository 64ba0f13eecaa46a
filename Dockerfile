# syntax=docker/dockerfile:1
#
# graft image: a glibc release build on a distroless runtime.
#
# Why not a static musl binary on scratch: ring builds C and assembly that needs a musl
# cross toolchain per architecture, and musl's allocator is slow under tokio's
# multi-threaded load. distroless/cc ships only glibc, libgcc and CA roots: no shell,
# no package manager, and the nonroot (65532) user predefined. Both stages are Debian 12,
# so the binary's glibc matches. The tags are pinned to a toolchain and a Debian release;
# release pipelines can additionally pin digests (`image:tag@sha256:...`).
#
#   docker build -t ghcr.io/graft-dev/graft:0.1.0 .

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The cache mounts keep the registry and target/ across builds (BuildKit); the binary is
# copied out of the cached target/ because cache mounts are not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin graft \
    && install -D -m 0755 target/release/graft /out/graft

FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
COPY --from=build /out/graft /usr/local/bin/graft
USER 65532:65532
# The binary never asks for transparent huge pages (mimalloc's no_thp); on nodes where
# THP is "always" this turns them off for the process too, so RSS stays what was measured.
ENV MIMALLOC_ALLOW_THP=0
# 8443: AdmissionReviews over HTTPS. 8080: /healthz, /readyz, /metrics over plain HTTP.
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/graft"]
CMD ["serve"]
