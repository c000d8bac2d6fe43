#!/usr/bin/env bash
# Checks the systemd units in contrib/systemd against a built cdigen binary:
#   1. `systemd-analyze verify` (any message fails: it exits 0 on unknown
#      keys), on copies whose /usr/bin/cdigen points at BIN;
#   2. every ExecStart= command line of cdigen is one the binary accepts
#      (run with --help appended), one of systemctl only queues a restart
#      (--no-block) of a unit here, and every man: page named in
#      Documentation= exists in man/;
#   3. `systemd-analyze security --offline=yes`: exposure at most 2.0;
#   4. the sandbox of cdigen-generate.service, as far as it can be built
#      without systemd as PID 1: no capabilities (bounding set empty, no new
#      privileges), the root file system read-only but for the unit's
#      ReadWritePaths=; `cdigen generate` on the example fixture must write
#      exactly its golden specs there.
# Usage: .ci/check-units.sh BIN   (run from the repository root, as root)
set -euo pipefail
bin=$(realpath "$1")
units=contrib/systemd

fail() { echo "check-units: $*" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$units"/*.service "$units"/*.path; do
    sed "s|/usr/bin/cdigen|$bin|g" "$f" > "$tmp/$(basename "$f")"
done

echo "-- systemd-analyze verify"
out=$(systemd-analyze verify --man=no "$tmp"/*.service "$tmp"/*.path 2>&1) || fail "verify failed: $out"
[ -z "$out" ] || fail "verify: $out"

echo "-- command lines and man pages"
for f in "$units"/*.service; do
    while IFS= read -r line; do
        # ExecStart=/usr/bin/cdigen SUB ARGS... $VARS  ->  BIN SUB ARGS... --help
        read -r -a words <<< "${line#ExecStart=}"
        if [ "${words[0]}" = /usr/bin/systemctl ]; then
            # Queues a restart and returns: never waits on the unit it restarts.
            if [ "${#words[@]}" -ne 4 ] || [ "${words[1]}" != --no-block ] || [ "${words[2]}" != restart ]; then
                fail "$f: expected systemctl --no-block restart UNIT: $line"
            fi
            [ -f "$units/${words[3]}" ] || fail "$f: restarts ${words[3]}, which is not in $units"
            echo "   $f: systemctl --no-block restart ${words[3]}"
            continue
        fi
        [ "${words[0]}" = /usr/bin/cdigen ] || fail "$f: ExecStart= is neither /usr/bin/cdigen nor /usr/bin/systemctl: $line"
        args=()
        for w in "${words[@]:1}"; do
            case $w in \$*) ;; *) args+=("$w") ;; esac
        done
        "$bin" "${args[@]}" --help >/dev/null || fail "$f: cdigen rejects: ${args[*]}"
        echo "   $f: cdigen ${args[*]}: accepted"
    done < <(grep '^ExecStart=' "$f")
done
grep -ho 'man:[a-z-]*([0-9])' "$units"/* | sort -u | while IFS= read -r page; do
    name=${page#man:}
    file="man/${name%(*}.${name//[^0-9]/}"
    [ -f "$file" ] || fail "Documentation= $page: no $file"
done

echo "-- systemd-analyze security"
for f in "$tmp"/*.service; do
    line=$(systemd-analyze security --offline=yes "$f" 2>&1 | grep 'Overall exposure level') \
        || fail "security: no result for $(basename "$f")"
    echo "   ${line#→ }"
    level=$(echo "$line" | grep -Eo '[0-9]+\.[0-9]+' | head -1)
    awk -v l="$level" 'BEGIN { exit !(l <= 2.0) }' || fail "$(basename "$f"): exposure $level > 2.0"
done

echo "-- sandbox of cdigen-generate.service (no capabilities, read-only but ReadWritePaths=)"
rw=$(sed -n 's/^ReadWritePaths=//p' "$units/cdigen-generate.service")
[ -n "$rw" ] || fail "cdigen-generate.service has no ReadWritePaths="
grep -q '^CapabilityBoundingSet=$' "$units/cdigen-generate.service" || fail "expected an empty CapabilityBoundingSet="
# In a private mount namespace: a fresh /run with the unit's writable
# directories, everything else read-only. The hooks name cdigen-hook where
# the package installs it (/usr/bin/cdigen-hook), as the goldens do.
# shellcheck disable=SC2016
unshare -m bash -euc '
    bin=$1; rw=$2; out=$3
    mount --make-rprivate /
    mount -t tmpfs -o mode=0755 tmpfs /run
    for d in $rw; do mkdir -p "$d"; mount --bind "$d" "$d"; done
    mount -o remount,bind,ro /run
    mount --bind "$out" "$out"
    mount -o remount,bind,ro /
    setpriv --bounding-set=-all --inh-caps=-all --no-new-privs -- \
        "$bin" generate -q --root fixtures/example/root \
        --generators /nonexistent --output-dir /var/run/cdi \
        --hook-path /usr/bin/cdigen-hook >/dev/null
    # Nothing else is writable.
    if touch /var/lib/cdigen-sandbox-probe 2>/dev/null; then echo "/var/lib is writable" >&2; exit 1; fi
    cp -r /run/cdi "$out/cdi"
' sandbox "$bin" "$rw" "$tmp"
diff -r -x '.cdigen*' fixtures/example/expected/cdi "$tmp/cdi" || fail "the sandboxed run wrote other specs than fixtures/example/expected/cdi"
echo "   generate without capabilities wrote fixtures/example/expected/cdi exactly"
echo "check-units: ok"
