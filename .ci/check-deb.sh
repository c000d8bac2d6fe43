#!/usr/bin/env bash
# Checks the Debian package deploy/release.sh builds, in a real dpkg run on
# this machine (as root; it must not have cdigen installed, and it is left
# without it, purged, whatever happens):
#   1. lintian, failing on any error or warning;
#   2. install: every file in place and matching md5sums, /etc/default/cdigen
#      a conffile, cdigen-generate.{path,service} enabled (the links
#      deb-systemd-helper makes in /etc/systemd/system/*.wants, without a
#      running systemd too), cdigen-watch.service not;
#   3. upgrade to the same package re-versioned VERSION-2 (unpacked and
#      rebuilt with dpkg-deb, nothing recompiled) after the admin edited
#      /etc/default/cdigen and disabled cdigen-generate.service: the edit
#      and the choice are kept, the path unit stays enabled;
#   4. remove: the binaries gone, the conffile kept, every unit masked;
#   5. purge: the conffile, the enablement links and deb-systemd-helper's
#      state and masks gone.
# Usage: .ci/check-deb.sh cdigen_VERSION-1_ARCH.deb
set -euo pipefail
deb=$(realpath "${1:?usage: .ci/check-deb.sh DEB}")
units="cdigen-generate.path cdigen-generate.service cdigen-generate-restart.service cdigen-watch.service"
sys=/etc/systemd/system
dsh=/var/lib/systemd

fail() { echo "check-deb: FAIL: $*" >&2; exit 1; }
ok() { echo "check-deb: ok: $*"; }
status() { dpkg-query -W -f='${db:Status-Status}' cdigen 2>/dev/null || true; }
[ "$(id -u)" -eq 0 ] || fail "needs root (dpkg -i)"
case $(status) in
  "" | not-installed) ;;
  *) fail "cdigen is already on this machine ($(status)): it installs and purges the package; remove yours first" ;;
esac
[ ! -e /etc/default/cdigen ] || fail "/etc/default/cdigen exists and is not the package's: move it away first"
work=$(mktemp -d)
cleanup() {
  case $(status) in "" | not-installed) ;; *) dpkg -P cdigen >/dev/null 2>&1 || true ;; esac
  rm -rf "$work"
}
trap cleanup EXIT

echo "== lintian"
if ! lintian --version >/dev/null 2>&1; then
  fail "lintian is missing: apt-get install lintian"
fi
# As root lintian says it would rather not run as root; that line is not a tag.
lint=0
lintian --display-info --fail-on error,warning "$deb" >"$work/lintian" 2>&1 || lint=$?
grep -v 'running with root privileges' "$work/lintian" || true
[ "$lint" -eq 0 ] || fail "lintian reports errors or warnings on $deb (exit $lint)"
ok "lintian (no error or warning)"

# links UNIT: the enablement links of UNIT in /etc/systemd/system.
links() { find "$sys" -path "$sys/*.wants/$1" 2>/dev/null; }
enabled() {
  local l
  l=$(links "$1")
  [ -n "$l" ] || fail "$1: no enablement link in $sys/*.wants ($2)"
  [ -e "$l" ] || fail "$l: dangling ($2)"
}
disabled() { [ -z "$(links "$1")" ] || fail "$1 is enabled: $(links "$1") ($2)"; }

echo "== install"
dpkg -i "$deb" </dev/null
[ "$(status)" = installed ] || fail "not installed after dpkg -i: $(status)"
for path in /usr/bin/cdigen /usr/bin/cdigen-hook /usr/share/man/man1/cdigen.1.gz \
  /usr/share/man/man1/cdigen-generate.1.gz /usr/share/bash-completion/completions/cdigen \
  /usr/share/zsh/vendor-completions/_cdigen /usr/share/fish/vendor_completions.d/cdigen.fish \
  /usr/lib/udev/rules.d/99-cdigen.rules /usr/lib/systemd/system/cdigen-generate.service \
  /usr/lib/systemd/system/cdigen-generate.path /usr/lib/systemd/system/cdigen-generate-restart.service \
  /usr/lib/systemd/system/cdigen-watch.service /etc/default/cdigen \
  /usr/share/cdigen/generators/nvidia.yaml /usr/share/doc/cdigen/examples/cdigen-driver-hook \
  /usr/share/doc/cdigen/copyright /usr/share/doc/cdigen/changelog.Debian.gz; do
  [ -f "$path" ] || fail "missing after install: $path"
done
ok "files installed"
verify=$(dpkg --verify cdigen) || true
[ -z "$verify" ] || fail "dpkg --verify: $verify"
ok "dpkg --verify (md5sums)"
dpkg-query -W -f='${Conffiles}\n' cdigen | grep -q '^ /etc/default/cdigen ' ||
  fail "/etc/default/cdigen is not a conffile"
ok "conffile /etc/default/cdigen"
/usr/bin/cdigen --version >/dev/null || fail "/usr/bin/cdigen --version fails"
/usr/bin/cdigen-hook --version >/dev/null || fail "/usr/bin/cdigen-hook --version fails"
ok "/usr/bin/cdigen and cdigen-hook run"
enabled cdigen-generate.path "after install"
enabled cdigen-generate.service "after install"
disabled cdigen-watch.service "after install"
disabled cdigen-generate-restart.service "after install"
ok "cdigen-generate.{path,service} enabled ($(links cdigen-generate.path), $(links cdigen-generate.service)), the others not"

echo "== upgrade (same package as $(dpkg-deb -f "$deb" Version | sed 's/-1$/-2/'))"
dpkg-deb --raw-extract "$deb" "$work/pkg"
sed -i 's/^Version: \(.*\)-1$/Version: \1-2/' "$work/pkg/DEBIAN/control"
dpkg-deb --root-owner-group --build "$work/pkg" "$work/cdigen-2.deb" >/dev/null
echo 'CDIGEN_GENERATE_OPTS="-v"   # check-deb: the admin' >>/etc/default/cdigen
edited=$(md5sum </etc/default/cdigen)
# The admin disables it as `systemctl disable` would.
rm "$(links cdigen-generate.service)"
dpkg -i "$work/cdigen-2.deb" </dev/null
[ "$(dpkg-query -W -f='${Version}' cdigen)" = "$(dpkg-deb -f "$work/cdigen-2.deb" Version)" ] ||
  fail "not upgraded: $(dpkg-query -W -f='${Version}' cdigen)"
[ "$(md5sum </etc/default/cdigen)" = "$edited" ] || fail "the admin's /etc/default/cdigen was replaced on upgrade"
ok "the edited conffile kept"
enabled cdigen-generate.path "after upgrade"
disabled cdigen-generate.service "after upgrade, disabled by the admin before"
ok "cdigen-generate.path still enabled, the service the admin disabled still disabled"

echo "== remove"
dpkg -r cdigen </dev/null
[ "$(status)" = config-files ] || fail "after dpkg -r: $(status), not config-files"
for path in /usr/bin/cdigen /usr/bin/cdigen-hook /usr/lib/systemd/system/cdigen-generate.service \
  /usr/lib/udev/rules.d/99-cdigen.rules; do
  [ ! -e "$path" ] || fail "left after dpkg -r: $path"
done
ok "binaries, units and rule gone"
[ "$(md5sum </etc/default/cdigen)" = "$edited" ] || fail "/etc/default/cdigen not kept by dpkg -r"
ok "conffile kept"
for unit in $units; do
  [ "$(readlink "$sys/$unit")" = /dev/null ] || fail "$unit not masked after dpkg -r"
done
ok "every unit masked ($sys/UNIT -> /dev/null)"

echo "== purge"
dpkg -P cdigen </dev/null
case $(status) in "" | not-installed) ;; *) fail "after dpkg -P: $(status)" ;; esac
[ ! -e /etc/default/cdigen ] || fail "/etc/default/cdigen left after purge"
left=$(find "$sys" "$dsh/deb-systemd-helper-enabled" "$dsh/deb-systemd-helper-masked" \
  -name '*cdigen*' 2>/dev/null || true)
[ -z "$left" ] || fail "left after purge: $left"
ok "conffile, enablement links, masks and deb-systemd-helper state gone"
echo "check-deb: all passed"
