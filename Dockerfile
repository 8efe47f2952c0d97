# The karpenter-capi controller image: `docker build -t karpenter-capi:0.1.0 .`
# (see charts/karpenter-capi/README.md). The binary is static apart from glibc: rustls with the
# ring provider, no OpenSSL, so distroless/cc is all it needs at run time.

FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
RUN cargo build --release -p karpenter-capi --locked \
    && cp target/release/karpenter-capi /karpenter-capi

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /karpenter-capi /karpenter-capi
USER 65532:65532
ENTRYPOINT ["/karpenter-capi", "run"]
