# gclb-operator image, for users with a container build service (docker build, Cloud Build,
# kaniko): `docker build -t REGISTRY/gclb-operator:TAG .` (docs/install.md).
#
# `make image` builds an equivalent OCI image without a container engine or a base image
# download (deploy/image/build.sh): the same binary, the same runtime files (C library, CA
# certificates, nonroot user), the same entrypoint and user.
#
# Build stage: the release binary. The workspace builds the Compute emulator and the local
# Kubernetes API too; only the operator is built here.
FROM docker.io/library/rust:1.91-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin gclb-operator \
 && strip --strip-debug target/release/gclb-operator \
 && cp target/release/gclb-operator /gclb-operator

# Runtime: distroless (glibc, libgcc, CA certificates, /etc/passwd with nonroot 65532, no
# shell). The operator writes nothing outside the /tmp volume the Deployment mounts, so the
# root filesystem is mounted read-only (deploy/deployment.yaml).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /gclb-operator /gclb-operator
USER 65532:65532
ENTRYPOINT ["/gclb-operator"]
CMD ["run"]
