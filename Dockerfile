# The karpenter-capi controller image: `docker build -t karpenter-capi:0.1.0 .`
# (see charts/karpenter-capi/README.md). The binary is static apart from glibc: rustls with the
# ring provider, no OpenSSL, so distroless/cc is all it needs at run time.

FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
# The `dist` profile (Cargo.toml): release with whole-program optimization, a smaller binary
# and a smaller resident set; it takes about twice as long to build as `--release`.
RUN cargo build --profile dist -p karpenter-capi --locked \
    && cp target/dist/karpenter-capi /karpenter-capi

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /karpenter-capi /karpenter-capi
USER 65532:65532
ENTRYPOINT ["/karpenter-capi", "run"]
