#!/usr/bin/env bash
# Checks contrib/udev/99-cdigen.rules with udev's own parser and rule engine
# (`udevadm test`; systemd 252 has no `udevadm verify`):
#   1. loading the rules reports nothing about this file;
#   2. on this machine's PCI devices: a network/display/accelerator function
#      gets exactly one `systemctl --no-block restart cdigen-generate.service`
#      on each of add, remove, change, bind and unbind (and no SYSTEMD_WANTS,
#      which systemd ignores for devices it already knows); any other
#      function gets nothing.
# udevadm reads rules from fixed directories: the rule is put in /run/udev
# in a private mount namespace (a fresh /run), so nothing on the host
# changes. Only PCI and CPU devices are used: `udevadm test` on a network
# interface would apply the naming rules and rename the interface.
# Usage: .ci/check-udev.sh   (run from the repository root, as root)
set -euo pipefail
rule=contrib/udev/99-cdigen.rules
name=$(basename "$rule")

fail() { echo "check-udev: $*" >&2; exit 1; }

# udevadm test ACTION SYSPATH, with only our rule added; prints its output.
utest() {
    # shellcheck disable=SC2016
    unshare -m bash -euc '
        mount --make-rprivate /
        mount -t tmpfs -o mode=0755 tmpfs /run
        mkdir -p /run/udev/rules.d
        cp "$1" /run/udev/rules.d/
        udevadm test --action="$2" "$3" 2>&1
    ' utest "$rule" "$1" "$2"
}

echo "-- parse"
out=$(utest change /sys/devices/system/cpu/cpu0)
grep -q "Reading rules file: /run/udev/rules.d/$name" <<< "$out" || fail "udevadm did not read the rule: $out"
problems=$(grep "$name" <<< "$out" | grep -v "Reading rules file" || true)
[ -z "$problems" ] || fail "$problems"
echo "   no messages about $name"

echo "-- behaviour on this machine's PCI devices"
matched=0 other=0
for dev in /sys/bus/pci/devices/*; do
    class=$(cat "$dev/class")
    case $class in
        0x02*|0x03*|0x12*) kind=match ;;
        *) kind=other ;;
    esac
    if [ $kind = match ] && [ $matched -eq 0 ]; then
        for action in add remove change bind unbind; do
            out=$(utest "$action" "$dev")
            runs=$(grep -c "^run: '/usr/bin/systemctl --no-block restart cdigen-generate.service'$" <<< "$out" || true)
            [ "$runs" -eq 1 ] || fail "$dev ($class) $action: $runs systemctl restarts, expected 1: $out"
            ! grep -q 'SYSTEMD_WANTS=.*cdigen' <<< "$out" || fail "$dev ($class) $action: SYSTEMD_WANTS set: $out"
        done
        echo "   $dev ($class): add, remove, change, bind and unbind restart cdigen-generate.service"
        matched=1
    elif [ $kind = other ] && [ $other -eq 0 ]; then
        for action in add remove change bind unbind; do
            out=$(utest "$action" "$dev")
            ! grep -q 'cdigen-generate' <<< "$out" || fail "$dev ($class) $action: matched: $out"
        done
        echo "   $dev ($class): add, remove, change, bind and unbind leave it alone"
        other=1
    fi
done
[ $matched -eq 1 ] || echo "   (no PCI network, display or accelerator function here: positive case not run)"
[ $other -eq 1 ] || echo "   (no other PCI function here: negative case not run)"
echo "check-udev: ok"
