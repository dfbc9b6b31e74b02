# The operator's image: one static binary and a CA bundle on an empty base.
#   buildah bud -t egress-proxy-operator .             (or docker build; the last stage)
#   buildah bud --target prebuilt -t egress-proxy-operator CONTEXT
#     where CONTEXT/dist holds an already built static binary and ca-certificates.crt
#     (scripts/image-test.sh builds, runs and checks it this way).

ARG RUST_VERSION=1.95.0

FROM docker.io/library/rust:${RUST_VERSION}-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY operator operator
COPY kube-sim kube-sim
COPY tests tests
COPY examples examples
# crt-static with an explicit --target gives a static-pie binary (build scripts and proc
# macros stay dynamic, which they must). Stripping takes it from about 149 MB to 25 MB.
RUN RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --locked \
        --target x86_64-unknown-linux-gnu -p egress-proxy-operator \
    && mkdir /dist \
    && strip -o /dist/egress-proxy-operator target/x86_64-unknown-linux-gnu/release/egress-proxy-operator \
    && cp /etc/ssl/certs/ca-certificates.crt /dist/

# What both image stages share. The CA bundle is needed even for a plain-http API server:
# without one, building the client fails ("No CA certificates were loaded from the system").
FROM scratch AS base
ARG SOURCE_URL=""
LABEL org.opencontainers.image.title="egress-proxy-operator" \
      org.opencontainers.image.description="Kubernetes operator that writes HTTP proxy settings (and NO_PROXY in each client's dialect) into selected workloads" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="${SOURCE_URL}"
USER 65532:65532
ENTRYPOINT ["/egress-proxy-operator"]
CMD ["run"]

# The same image from files in the build context.
FROM base AS prebuilt
COPY dist/egress-proxy-operator /egress-proxy-operator
COPY dist/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt

# The default: the image built from source.
FROM base
COPY --from=build /dist/egress-proxy-operator /egress-proxy-operator
COPY --from=build /dist/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
