#!/usr/bin/env bash
# Instructions per parse of the realistic pod's object, for each mode of the probe.
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=bench/common.sh
source ../common.sh
cargo build --release --quiet
for mode in serde_json sonic sonic-skip; do
    echo "$mode: $(instructions_per_unit target/release/parse_probe "$mode" 100) instructions per parse"
done
