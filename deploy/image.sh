#!/usr/bin/env bash
# Builds the image deploy/Dockerfile describes without a container engine:
# the release `cdigen` and the static `cdigen-hook` on a Debian bookworm
# minimal root, as an OCI image archive (an oci-layout tar) that
# `ctr -n k8s.io images import`, `podman load` and `skopeo` take.
#
#   deploy/image.sh OUT.tar [NAME]   (NAME: docker.io/library/cdigen:VERSION)
#
# deploy/release.sh makes it with the other release artefacts.
# Needs root (debootstrap), debootstrap, tar, sha256sum, readelf and a Debian mirror
# (DEBIAN_MIRROR, default http://deb.debian.org/debian). CDIGEN_IMAGE_ROOTFS=DIR
# reuses a bookworm root made before (it is copied, not changed);
# CDIGEN_IMAGE_BINARIES=DIR takes cdigen and cdigen-hook from DIR instead of
# building them (the hook must be the static build).
#
# The result matches the Dockerfile's last stage: debian:bookworm-slim's
# content (minbase, without documentation, manual pages, locales or package
# lists), /usr/bin/cdigen, /usr/bin/cdigen-hook, ENTRYPOINT
# ["/usr/bin/cdigen"], CMD ["--help"]. One uncompressed layer; file times
# are the epoch and owners root, so the same inputs give the same digests.
set -euo pipefail

out=${1:?usage: deploy/image.sh OUT.tar [NAME]}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
name=${2:-docker.io/library/cdigen:$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n1)}
case $out in /*) ;; *) out=$PWD/$out ;; esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -n "${CDIGEN_IMAGE_BINARIES:-}" ]; then
  bins=$CDIGEN_IMAGE_BINARIES
else
  echo "image: building cdigen (release) and cdigen-hook (static)" >&2
  (cd "$repo" &&
    cargo build --release --locked --bin cdigen &&
    cargo rustc --release --locked --bin cdigen-hook -- -C target-feature=+crt-static)
  bins=${CARGO_TARGET_DIR:-$repo/target}/release
fi
if ! readelf -l "$bins/cdigen-hook" >/dev/null || readelf -l "$bins/cdigen-hook" | grep -q 'program interpreter'; then
  echo "image: $bins/cdigen-hook is not static (build it with -C target-feature=+crt-static)" >&2
  exit 1
fi

root=$work/root
if [ -n "${CDIGEN_IMAGE_ROOTFS:-}" ]; then
  echo "image: root from $CDIGEN_IMAGE_ROOTFS" >&2
  cp -a "$CDIGEN_IMAGE_ROOTFS" "$root"
else
  echo "image: debootstrap --variant=minbase bookworm from $mirror" >&2
  debootstrap --variant=minbase bookworm "$root" "$mirror" >&2
fi
# What bookworm-slim leaves out.
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
  "$root"/usr/share/locale/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
  "$root"/var/cache/apt/archives/*.deb "$root"/var/log/*.log "$root"/var/log/apt/*
install -m 0755 "$bins/cdigen" "$root/usr/bin/cdigen"
install -m 0755 "$bins/cdigen-hook" "$root/usr/bin/cdigen-hook"

blobs=$work/image/blobs/sha256
mkdir -p "$blobs"
# blob FILE: moves FILE into the blobs and prints "DIGEST SIZE".
blob() {
  local sum size
  sum=$(sha256sum "$1" | cut -d' ' -f1)
  size=$(stat -c %s "$1")
  mv "$1" "$blobs/$sum"
  echo "sha256:$sum $size"
}

tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --xattrs \
  -C "$root" -cf "$work/layer.tar" .
read -r layer layer_size < <(blob "$work/layer.tar")

arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
printf '%s' "{\"architecture\":\"$arch\",\"os\":\"linux\",\"created\":\"1970-01-01T00:00:00Z\",\
\"config\":{\"Entrypoint\":[\"/usr/bin/cdigen\"],\"Cmd\":[\"--help\"],\
\"Env\":[\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"],\"WorkingDir\":\"/\"},\
\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"$layer\"]},\
\"history\":[{\"created\":\"1970-01-01T00:00:00Z\",\"created_by\":\"deploy/image.sh\"}]}" >"$work/config.json"
read -r config config_size < <(blob "$work/config.json")

printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\
\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"$config\",\"size\":$config_size},\
\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"$layer\",\"size\":$layer_size}]}" \
  >"$work/manifest.json"
read -r manifest manifest_size < <(blob "$work/manifest.json")

tag=${name##*:}
printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\
\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"$manifest\",\
\"size\":$manifest_size,\"platform\":{\"architecture\":\"$arch\",\"os\":\"linux\"},\
\"annotations\":{\"io.containerd.image.name\":\"$name\",\"org.opencontainers.image.ref.name\":\"$tag\"}}]}" \
  >"$work/image/index.json"
printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$work/image/oci-layout"

tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work/image" -cf "$out" .
echo "image: $out ($name, manifest $manifest)" >&2
