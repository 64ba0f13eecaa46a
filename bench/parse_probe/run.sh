#!/usr/bin/env bash
# Instructions per parse of the realistic pod's object, for each mode of the probe.
set -euo pipefail
cd "$(dirname "$0")"
cargo build --release --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for mode in serde_json sonic sonic-skip; do
    for n in 0 100; do
        valgrind --tool=callgrind --callgrind-out-file="$out/$mode-$n" \
            target/release/parse_probe "$mode" "$n" >/dev/null 2>&1
    done
    a=$(awk '/^totals:/ {print $2}' "$out/$mode-0")
    b=$(awk '/^totals:/ {print $2}' "$out/$mode-100")
    echo "$mode: $(((b - a) / 100)) instructions per parse"
done
