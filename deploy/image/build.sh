#!/usr/bin/env bash
# Builds the gclb-operator OCI image offline (`make image`): no container engine, no base image
# download. The runtime is assembled from this machine's Debian files, the way the Dockerfile's
# distroless base (gcr.io/distroless/cc-debian12) is: the operator binary, the C library and
# loader it links (ldd), the CA certificates (Debian's ca-certificates bundle), /etc/passwd and
# /etc/group with user and group nonroot (65532), /etc/nsswitch.conf and an empty /tmp. umoci
# (Debian's package) writes the OCI image layout; skopeo (Debian's) writes an OCI archive that
# `skopeo copy` pushes to any registry (docs/install.md).
#
# Environment:
#   IMAGE_BINARY  the operator binary (default: $CARGO_TARGET_DIR/release/gclb-operator,
#                 brought up to date with `cargo build --release` first)
#   IMAGE_DIR     output directory (default: $CARGO_TARGET_DIR/image, else target/image)
#   IMAGE_TAG     tag (default: the crate version)
# Output: $IMAGE_DIR/oci (OCI image layout, tag $IMAGE_TAG) and $IMAGE_DIR/gclb-operator.tar
# (oci-archive); the last line printed is the image's size.
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET=${CARGO_TARGET_DIR:-target}
IMAGE_DIR=${IMAGE_DIR:-$TARGET/image}
IMAGE_TAG=${IMAGE_TAG:-$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)}
BINARY=${IMAGE_BINARY:-$TARGET/release/gclb-operator}
for tool in umoci skopeo strip ldd; do
  command -v "$tool" >/dev/null || { echo "$tool is required: apt-get install -y umoci skopeo binutils" >&2; exit 1; }
done
if [ -n "${IMAGE_BINARY:-}" ]; then
  [ -x "$BINARY" ] || { echo "IMAGE_BINARY=$BINARY does not exist" >&2; exit 1; }
else
  # Always through cargo, so the image never ships a release binary older than the sources
  # (a no-op when it is up to date).
  cargo build --release --locked --bin gclb-operator
fi

rm -rf "$IMAGE_DIR"
mkdir -p "$IMAGE_DIR"
ROOTFS=$(mktemp -d)
trap 'rm -rf "$ROOTFS"' EXIT
# The layer records the root directory's mode: / must be traversable by the nonroot user.
chmod 0755 "$ROOTFS"

# The binary, without debug sections (symbols stay for backtraces).
install -m 0755 "$BINARY" "$ROOTFS/gclb-operator"
strip --strip-debug "$ROOTFS/gclb-operator"
# The shared libraries it links and the dynamic loader, at the paths the binary names.
ldd "$BINARY" | awk '/=> \//{print $3} /^\t\//{print $1}' | while read -r lib; do
  mkdir -p "$ROOTFS$(dirname "$lib")"
  cp -L "$lib" "$ROOTFS$lib"
done
# CA certificates (the Compute API and Google's token endpoint are HTTPS).
install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
# Users and name resolution, as distroless has them.
mkdir -p "$ROOTFS/etc" "$ROOTFS/home/nonroot"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ROOTFS/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$ROOTFS/etc/group"
printf 'hosts: files dns\n' >"$ROOTFS/etc/nsswitch.conf"
chown 65532:65532 "$ROOTFS/home/nonroot" 2>/dev/null || true
mkdir -p "$ROOTFS/tmp" && chmod 1777 "$ROOTFS/tmp"

OCI="$IMAGE_DIR/oci"
umoci init --layout "$OCI"
umoci new --image "$OCI:$IMAGE_TAG"
BUNDLE=$(mktemp -d)
rm -rf "$BUNDLE" && trap 'rm -rf "$ROOTFS" "$BUNDLE"' EXIT
umoci unpack --rootless --image "$OCI:$IMAGE_TAG" "$BUNDLE" >/dev/null
cp -a "$ROOTFS/." "$BUNDLE/rootfs/"
umoci repack --image "$OCI:$IMAGE_TAG" "$BUNDLE"
umoci config --image "$OCI:$IMAGE_TAG" \
  --os linux --architecture amd64 \
  --config.user 65532:65532 \
  --config.entrypoint /gclb-operator --config.cmd run \
  --config.workingdir / \
  --config.env PATH=/usr/local/bin:/usr/bin:/bin \
  --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --config.label org.opencontainers.image.title=gclb-operator \
  --config.label org.opencontainers.image.version="$IMAGE_TAG" \
  --config.label org.opencontainers.image.source=https://github.com/gclb-operator/gclb-operator
umoci gc --layout "$OCI"
skopeo copy --quiet "oci:$OCI:$IMAGE_TAG" "oci-archive:$IMAGE_DIR/gclb-operator.tar:$IMAGE_TAG"

# Size: the compressed layers (what a registry stores and a node pulls) and the unpacked files.
LAYERS=$(skopeo inspect --raw "oci:$OCI:$IMAGE_TAG" | python3 -c 'import json,sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))')
UNPACKED=$(du -sb "$ROOTFS" | cut -f1)
echo "image $OCI:$IMAGE_TAG (archive $IMAGE_DIR/gclb-operator.tar)"
echo "image size: $((LAYERS / 1024)) KiB compressed, $((UNPACKED / 1024)) KiB unpacked"
