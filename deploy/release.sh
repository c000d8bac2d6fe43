#!/usr/bin/env bash
# Builds every release artefact of cdigen into OUTDIR:
#
#   cdigen-VERSION-ARCH-linux.tar.gz   binaries (default features), man pages,
#                                      completions, units, udev rule, docs
#   cdigen_VERSION-1_DEBARCH.deb       the Debian package
#   cdigen-VERSION-oci.tar             the DaemonSets' image (deploy/image.sh)
#   SHA256SUMS                         over the three (`sha256sum -c SHA256SUMS`)
#
#   deploy/release.sh OUTDIR
#
# Needs Rust (cargo, rustc) and Debian's packages listed in `need` below;
# run as root it installs the missing ones with apt-get, otherwise it names
# them. The image needs root (debootstrap) and a Debian mirror (see
# deploy/image.sh; its CDIGEN_IMAGE_ROOTFS and DEBIAN_MIRROR apply). One
# build serves all three: `cdigen` with default features (no libudev: `watch`
# reads the kernel's uevents itself and waits for udev's queue, so the
# `udev` feature is for builds from source) and the static `cdigen-hook`.
# Archive members are sorted, owned by root and dated from the last commit
# (SOURCE_DATE_EPOCH), so the same binaries give the same archives.
set -euo pipefail

out=${1:?usage: deploy/release.sh OUTDIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
mkdir -p "$out"
out=$(cd "$out" && pwd)

start=$SECONDS
step() { echo "release: $1 ($((SECONDS - start)) s so far)" >&2; }
fail() { echo "release: $*" >&2; exit 1; }

step "tools"
if ! command -v cargo >/dev/null || ! command -v rustc >/dev/null; then
  fail "needs Rust (cargo and rustc): https://rustup.rs"
fi
# command or check -> Debian package.
missing=()
need() { if ! eval "$1" >/dev/null 2>&1; then missing+=("$2"); fi; }
need "command -v cc" gcc
need "test -e /usr/lib/$(gcc -dumpmachine 2>/dev/null)/libc.a" libc6-dev # static cdigen-hook
need "command -v dpkg-deb" dpkg
need "command -v dpkg-shlibdeps" dpkg-dev
need "command -v readelf" binutils
need "command -v debootstrap" debootstrap
need "command -v xz" xz-utils
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "release: installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    fail "missing Debian packages; install them with: sudo apt-get install ${missing[*]}"
  fi
fi
[ "$(id -u)" -eq 0 ] || fail "the image needs root (debootstrap): run as root"

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
[ -n "$version" ] || fail "no version in Cargo.toml"
arch=$(rustc -vV | sed -n 's/^host: \([^-]*\)-.*/\1/p')
debarch=$(dpkg --print-architecture)
# Exported only after the builds: C build scripts (cc) rebuild on a change
# of SOURCE_DATE_EPOCH, which would make every release a full rebuild.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
if [ -z "${CDIGEN_BUILD_REVISION:-}" ] && rev=$(git rev-parse --short=12 HEAD 2>/dev/null); then
  export CDIGEN_BUILD_REVISION=$rev
fi
target=${CARGO_TARGET_DIR:-$repo/target}/release

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/default"

step "cdigen (release, default features)"
cargo build --release --locked --bin cdigen
cp "$target/cdigen" "$work/default/cdigen"
step "cdigen-hook (release, static)"
cargo rustc --release --locked --bin cdigen-hook -- -C target-feature=+crt-static
cp "$target/cdigen-hook" "$work/default/cdigen-hook"

export SOURCE_DATE_EPOCH=$epoch LC_ALL=C.UTF-8 TZ=UTC

# Already stripped (profile.release); the compiler's notes go too, as
# dh_strip does.
strip --remove-section=.comment --remove-section=.note \
  "$work/default/cdigen" "$work/default/cdigen-hook"

# The binaries as promised: the default build needs only the C library's
# own shared objects (NVML is opened with dlopen), the hook none at all.
while read -r lib; do
  case $lib in
    libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | libgcc_s.so.* | ld-linux*) ;;
    *) fail "cdigen needs $lib: only libc-family libraries are allowed" ;;
  esac
done < <(readelf -d "$work/default/cdigen" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if readelf -l "$work/default/cdigen-hook" | grep -q 'program interpreter' ||
  readelf -d "$work/default/cdigen-hook" | grep -q '(NEEDED)'; then
  fail "cdigen-hook is not linked statically"
fi

# stage ROOT BIN: the files both the tarball and the package install, under
# ROOT as they go under /, with BIN/cdigen and BIN/cdigen-hook.
stage() {
  local root=$1 bin=$2 doc=$1/usr/share/doc/cdigen f
  install -D -m 0755 "$bin/cdigen" "$root/usr/bin/cdigen"
  install -D -m 0755 "$work/default/cdigen-hook" "$root/usr/bin/cdigen-hook"
  install -d "$root/usr/share/man/man1"
  for f in man/*.1; do gzip -9n <"$f" >"$root/usr/share/man/man1/${f#man/}.gz"; done
  install -D -m 0644 contrib/completions/cdigen.bash "$root/usr/share/bash-completion/completions/cdigen"
  install -D -m 0644 contrib/completions/_cdigen "$root/usr/share/zsh/vendor-completions/_cdigen"
  install -D -m 0644 contrib/completions/cdigen.fish "$root/usr/share/fish/vendor_completions.d/cdigen.fish"
  install -D -m 0644 contrib/udev/99-cdigen.rules "$root/usr/lib/udev/rules.d/99-cdigen.rules"
  install -d "$root/usr/lib/systemd/system"
  install -m 0644 contrib/systemd/*.service contrib/systemd/*.path "$root/usr/lib/systemd/system/"
  install -D -m 0644 contrib/default/cdigen "$root/etc/default/cdigen"
  install -d "$root/usr/share/cdigen/generators" "$root/usr/share/cdigen/templates"
  install -m 0644 generators/*.yaml "$root/usr/share/cdigen/generators/"
  install -m 0644 templates/*.json.hbs "$root/usr/share/cdigen/templates/"
  install -D -m 0644 README.md "$doc/README.md"
  install -d "$doc/docs"
  install -m 0644 docs/*.md "$doc/docs/"
  install -D -m 0644 contrib/README.md "$doc/operations.md"
  install -D -m 0644 contrib/cron/cdigen "$doc/examples/cron.d/cdigen"
  install -D -m 0755 contrib/hooks/cdigen-driver-hook "$doc/examples/cdigen-driver-hook"
}

step "tarball"
name=cdigen-$version-$arch-linux
tree=$work/tar/$name
stage "$tree" "$work/default"
install -m 0644 LICENSE "$tree/LICENSE"
sed "s/@VERSION@/$version/g; s/@NAME@/$name/g" deploy/README-install.txt >"$tree/README-install.txt"
chmod 0644 "$tree/README-install.txt"
# Files only: extracting over / creates missing directories and leaves
# existing ones (and their modes) alone.
(cd "$work/tar" && find "$name" ! -type d -print0 | sort -z |
  tar --no-recursion --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    --format=gnu --null -cf - --files-from=- | gzip -9n >"$out/$name.tar.gz")

step "Debian package"
deb=cdigen_$version-1_$debarch.deb
pkg=$work/deb
stage "$pkg" "$work/default"
install -m 0644 contrib/debian/copyright "$pkg/usr/share/doc/cdigen/copyright"
changelog_date=$(date -u -R -d "@$SOURCE_DATE_EPOCH")
printf '%s\n' "cdigen ($version-1) unstable; urgency=medium" "" \
  "  * Release $version: deploy/release.sh from the upstream sources." "" \
  " -- cdigen maintainers <maintainers@cdigen.io>  $changelog_date" |
  gzip -9n >"$pkg/usr/share/doc/cdigen/changelog.Debian.gz"
if [ -f CHANGELOG.md ]; then
  gzip -9n <CHANGELOG.md >"$pkg/usr/share/doc/cdigen/changelog.gz"
fi
if [ -f contrib/debian/lintian-overrides ]; then
  install -D -m 0644 contrib/debian/lintian-overrides "$pkg/usr/share/lintian/overrides/cdigen"
fi
install -d "$pkg/DEBIAN"
install -m 0755 contrib/debian/postinst contrib/debian/prerm contrib/debian/postrm "$pkg/DEBIAN/"
echo /etc/default/cdigen >"$pkg/DEBIAN/conffiles"
# Depends from the libraries the dynamic binary needs, through dpkg's
# shlibs and symbols files (dpkg-shlibdeps reads debian/control).
mkdir -p "$work/shlibs/debian"
printf 'Source: cdigen\n\nPackage: cdigen\nArchitecture: any\n' >"$work/shlibs/debian/control"
depends=$(cd "$work/shlibs" && dpkg-shlibdeps -O -e"$pkg/usr/bin/cdigen" 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')
case $depends in *libc6*) ;; *) fail "dpkg-shlibdeps gave no libc6 dependency: '$depends'" ;; esac
# dpkg's own count: one KiB per started KiB of each file, one per directory.
installed_size=$(find "$pkg" -path "$pkg/DEBIAN" -prune -o -printf '%s %y\n' |
  awk '{ if ($2 == "d") n += 1; else n += int(($1 + 1023) / 1024) } END { print n }')
(cd "$pkg" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\0' |
  sort -z | xargs -0 md5sum) >"$pkg/DEBIAN/md5sums"
cat >"$pkg/DEBIAN/control" <<EOF
Package: cdigen
Version: $version-1
Architecture: $debarch
Maintainer: cdigen maintainers <maintainers@cdigen.io>
Installed-Size: $installed_size
Depends: $depends
Section: admin
Priority: optional
Description: Container Device Interface (CDI) specs for a host's devices
 cdigen discovers the devices of a Linux host (DRM GPUs, VFIO, SR-IOV VFs,
 vDPA, NVIDIA GPUs with MIG) from sysfs and procfs and writes the Container
 Device Interface (CDI) specs that podman, Docker, containerd and CRI-O
 read, and NPWG device-info files for Kubernetes networking.
 .
 The package keeps the specs in /var/run/cdi current at boot, on driver
 changes and on hotplug.
EOF
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/conffiles" "$pkg/DEBIAN/md5sums"
find "$pkg" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
rm -f "$out"/cdigen_*.deb
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$out/$deb" >/dev/null

step "OCI image (deploy/image.sh)"
image=cdigen-$version-oci.tar
CDIGEN_IMAGE_BINARIES=$work/default deploy/image.sh "$out/$image" "docker.io/library/cdigen:$version"

step "SHA256SUMS"
(cd "$out" && sha256sum "$name.tar.gz" "$deb" "$image" >SHA256SUMS && sha256sum -c --quiet SHA256SUMS)
step "done"
(cd "$out" && ls -l "$name.tar.gz" "$deb" "$image" SHA256SUMS) >&2
