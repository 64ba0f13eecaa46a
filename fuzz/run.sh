#!/usr/bin/env bash
# Runs every fuzz target for a bounded time and prints executions per target.
#
#   fuzz/run.sh [SECONDS_PER_TARGET]      (default 300)
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a nightly toolchain, or stable with
# RUSTC_BOOTSTRAP=1. Findings land in fuzz/artifacts/<target>/; the working corpus in
# fuzz/target/corpus/<target>/ (the committed seeds in fuzz/corpus/ are never written).
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-${FUZZ_SECONDS:-300}}"
targets="${FUZZ_TARGETS:-policy_load review patch_roundtrip}"
toolchain="${FUZZ_TOOLCHAIN:-+nightly}"
for target in $targets; do
    work="target/corpus/$target"
    mkdir -p "$work" "artifacts/$target"
    log="target/$target.log"
    echo "== $target: ${seconds}s"
    # -rss_limit_mb and -timeout turn a memory blow-up or a slow input into a finding.
    cargo $toolchain fuzz run "$target" "$work" "corpus/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
        -print_final_stats=1 >"$log" 2>&1 || { echo "   FAILED, see fuzz/$log"; tail -n 30 "$log"; }
    grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+[[:space:]]+DONE' "$log" | sed 's/^/   /' || true
done
