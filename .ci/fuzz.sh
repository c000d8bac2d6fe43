#!/usr/bin/env bash
# Builds the fuzz targets in fuzz/ (cargo-fuzz: libFuzzer on the nightly
# toolchain) and runs each for a bounded time, several at once. Exits 1 if
# any target crashes (a panic, a failed assertion), hangs on one input or
# runs out of memory.
#
#   .ci/fuzz.sh                                    # every target, 10 s each
#   FUZZ_SECONDS=300 FUZZ_OPT_LEVEL=3 .ci/fuzz.sh spec dev_manifest # some, longer
#
# The committed corpus, fuzz/corpus/<target>/, seeds each run and is never
# written to: what a run discovers goes to a temporary directory. An input
# that fails is saved as fuzz/artifacts/<target>/crash-* (or timeout-*,
# oom-*); replay it with
# `cargo +nightly fuzz run -s none --codegen-units 16 <target> FILE`.
#
# Environment: FUZZ_SECONDS (per target, default 10), FUZZ_JOBS (targets
# run at once, default: the number of CPUs), FUZZ_TOOLCHAIN (default
# nightly; installed with rustup when missing), FUZZ_OPT_LEVEL (default 1;
# 3 for long runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=${FUZZ_SECONDS:-10}
jobs=${FUZZ_JOBS:-$(nproc)}
toolchain=${FUZZ_TOOLCHAIN:-nightly}
cargo_fuzz_version=0.13.2
start=$SECONDS

if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
  rustup toolchain install "$toolchain" --profile minimal
fi
if ! cargo fuzz --version 2>/dev/null | grep -qx "cargo-fuzz $cargo_fuzz_version"; then
  cargo install cargo-fuzz --version "$cargo_fuzz_version" --locked
fi

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for file in fuzz/fuzz_targets/*.rs; do
    name=${file##*/}
    targets+=("${name%.rs}")
  done
fi

# No sanitizer: cdigen forbids unsafe code, so what the fuzzers look for is
# panics, failed assertions, hangs and memory use, which libFuzzer catches
# without one, and the build is much faster. Sixteen codegen units (cargo
# fuzz defaults to one) likewise trade a little speed for build time.
# Memory is bounded by -rss_limit_mb below (without a sanitizer libFuzzer
# has no malloc hook, so -malloc_limit_mb would do nothing).
# Optimisation level 1 (FUZZ_OPT_LEVEL; cargo fuzz's is 3) builds in much
# less time; a bounded run's inputs execute more slowly, which matters
# little next to replaying the corpus and the build it saves.
export CARGO_PROFILE_RELEASE_OPT_LEVEL=${FUZZ_OPT_LEVEL:-1}
build=(cargo "+$toolchain" fuzz build --sanitizer none --codegen-units 16)
echo "fuzz: building ${#targets[@]} targets: ${build[*]}"
"${build[@]}"
host=$(rustup run "$toolchain" rustc -vV | sed -n 's/^host: //p')
bin_dir="${CARGO_TARGET_DIR:-fuzz/target}/$host/release"
echo "fuzz: built in $((SECONDS - start)) s"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs one target; prints one line, or the end of its log when it fails.
run_one() {
  local target=$1 log="$work/$1.log"
  mkdir -p "$work/$target" "fuzz/artifacts/$target"
  if timeout "$((seconds + 60))" "$bin_dir/$target" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="fuzz/artifacts/$target/" "$work/$target" "fuzz/corpus/$target" \
    >"$log" 2>&1; then
    echo "ok: $target: $(grep -Eo '^Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n 1)s"
  else
    printf 'FAILED: %s (exit %s)\n%s\n' "$target" "$?" "$(tail -n 40 "$log")"
    return 1
  fi
}
# A pool of $jobs runs.
status=0
running=0
for target in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_one "$target" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
echo "fuzz: ${#targets[@]} targets, ${seconds} s each, $jobs at once; $((SECONDS - start)) s in all"
if [ "$status" -ne 0 ]; then
  echo "fuzz: a target failed; the inputs are in fuzz/artifacts/" >&2
fi
exit "$status"
