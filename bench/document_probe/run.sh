#!/usr/bin/env bash
# Instructions per review of the realistic pod, for each mode of the document prototype.
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=bench/common.sh
source ../common.sh
cargo build --release --quiet
for mode in serde_json eager eager-lean lazy graft check; do
    echo "$mode: $(instructions_per_unit target/release/document_probe "$mode" 200) instructions per review"
done
