#!/usr/bin/env bash
# Two servers side by side in one run: alternating rounds, each server started fresh,
# serving the realistic pod at its maximum rate or at RATE (16 keep-alive connections over
# TLS, loopback), the server on CPU 0 and oha on CPU 1. Per round it prints the req/s, the
# p99 and the server's CPU per request (from /proc), the measure to trust on a shared machine:
# alternating cancels the drift between rounds that back-to-back runs would charge to one
# server. Each side is a graft binary serving 100 generated policies, or `handwritten`:
# examples/handwritten_webhook.rs. Bounded: ROUNDS × 2 × (2 s warm-up + DURATION).
#
#   bash bench/ab.sh OLD_BINARY NEW_BINARY
#   ROUNDS=5 DURATION=10 bash bench/ab.sh OLD NEW
#   bash bench/ab.sh OLD NEW --log-format text        # further arguments go to `graft serve`
#   MATCHING=multus bash bench/ab.sh handwritten target/release/graft --log-format json
#       # graft doing the hand-written webhook's work: only the Multus policy matches
#   RATE=2000 DURATION=20 bash bench/ab.sh OLD NEW --log-format json
#       # a fixed rate, latency-corrected, instead of the maximum: each round adds its p99
#
# Build the binaries from the two commits (cargo build --release, then copy
# target/release/graft aside). Needs oha, jq and taskset.
set -euo pipefail

[ $# -ge 2 ] || { sed -n '2,19p' "$0" >&2; exit 1; }
OLD=$1
NEW=$2
shift 2
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8}
# Which policies of the 100 match the pod: all four, or `multus` (gen_policies' argument).
MATCHING=${MATCHING:-}
# A fixed rate (req/s) instead of the maximum.
RATE=${RATE:-}
RATE_ARGS=()
[ -z "$RATE" ] || RATE_ARGS=(-q "$RATE" --latency-correction)
for tool in oha jq taskset; do
    command -v "$tool" >/dev/null || { echo "$tool not found" >&2; exit 1; }
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"
WORK=$(mktemp -d /tmp/graft-ab.XXXXXX)
PORT=18473
BODY="$ROOT/benches/fixtures/pod-create-realistic.json"
SERVER_PID=
trap stop_server_and_clean_up EXIT

cargo build --release --quiet --example gen_policies --example handwritten_webhook
# shellcheck disable=SC2086 # MATCHING is one word or none
"$ROOT/target/release/examples/gen_policies" "$WORK/p100" 100 $MATCHING >/dev/null

# One round of one binary: prints "req/s µs-per-request p99-ms".
round() {
    local binary=$1 ca
    shift
    if [ "$binary" = handwritten ]; then
        ca="$WORK/handwritten-ca.pem"
        taskset -c 0 "$ROOT/target/release/examples/handwritten_webhook" "127.0.0.1:$PORT" \
            "$ca" $((DURATION + 30)) >"$WORK/server.log" 2>&1 &
    else
        ca="/tmp/graft-ca-$PORT.pem"
        RUST_LOG=info taskset -c 0 "$binary" serve --policies "$WORK/p100" \
            --namespaces "$ROOT/bench/namespaces.yaml" --listen "127.0.0.1:$PORT" \
            --metrics-listen 127.0.0.1:0 --shutdown-grace 1s "$@" >"$WORK/server.log" 2>&1 &
    fi
    SERVER_PID=$!
    wait_for_port "$PORT"
    drive() {
        taskset -c 1 oha --no-tui --output-format json -z "$1s" -c 16 "${RATE_ARGS[@]}" \
            --cacert "$ca" -m POST -T application/json -D "$BODY" \
            "https://127.0.0.1:$PORT/mutate?timeout=10s" >"$WORK/oha.json"
    }
    drive 2
    local before after rps p99
    before=$(cpu_ticks "$SERVER_PID")
    drive "$DURATION"
    after=$(cpu_ticks "$SERVER_PID")
    rps=$(jq -r '.summary.requestsPerSec' "$WORK/oha.json")
    p99=$(jq -r '.latencyPercentiles.p99 * 1000' "$WORK/oha.json")
    kill "$SERVER_PID"
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
    printf '%.0f %s %.3f\n' "$rps" "$(cpu_us_per_request "$before" "$after" "$rps" "$DURATION")" "$p99"
}

echo "old: $OLD; new: $NEW; 100 policies, ${MATCHING:-all four} matching the pod; ${RATE:-the maximum} req/s; graft serve $*"
echo
echo "| round | old req/s | old µs/request | old p99 ms | new req/s | new µs/request | new p99 ms |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for i in $(seq 1 "$ROUNDS"); do
    read -r old_rps old_us old_p99 < <(round "$OLD" "$@")
    read -r new_rps new_us new_p99 < <(round "$NEW" "$@")
    echo "| $i | $old_rps | $old_us | $old_p99 | $new_rps | $new_us | $new_p99 |"
done
