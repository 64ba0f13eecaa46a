#!/usr/bin/env bash
# Where graft serve's CPU goes per request: the release build with line tables (the
# `profiling` profile) serves the realistic pod with 100 policies at a fixed rate, `perf
# record` samples it with DWARF call graphs, and every sample is charged to the first part
# of the request path its stack is in. Loopback only; bounded in time.
#
#   bash bench/server_profile.sh                 # 2,000 req/s, 10 s sampled, log at info
#   RATE=3000 DURATION=5 GRAFT_LOG=warn bash bench/server_profile.sh
#   PIN=1 bash bench/server_profile.sh           # graft on CPU 0, oha on CPU 1
#
# Needs perf (linux-perf), oha and jq. Prints a Markdown table: part, share of samples,
# and microseconds of CPU per request (that share of the server's CPU time per request,
# read from /proc over a run of the same length without perf, just before the sampled one).
set -euo pipefail

DURATION=${DURATION:-10}
RATE=${RATE:-2000}
CONNECTIONS=${CONNECTIONS:-16}
GRAFT_LOG=${GRAFT_LOG:-info}
PIN=${PIN:-0}
SERVER_CPU=()
LOAD_CPU=()
if [ "$PIN" = 1 ]; then
    SERVER_CPU=(taskset -c 0)
    LOAD_CPU=(taskset -c 1)
fi
for tool in perf oha jq; do
    command -v "$tool" >/dev/null || { echo "$tool not found" >&2; exit 1; }
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/graft-profile.XXXXXX)
PORT=18453
BODY="$ROOT/benches/fixtures/pod-create-realistic.json"
GRAFT_PID=
cleanup() {
    if [ -n "$GRAFT_PID" ]; then
        kill "$GRAFT_PID" 2>/dev/null || true
        wait "$GRAFT_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

cd "$ROOT"
cargo build --profile profiling --quiet --bin graft
cargo build --release --quiet --example gen_policies
"$ROOT/target/release/examples/gen_policies" "$WORK/p100" 100 >/dev/null

RUST_LOG=$GRAFT_LOG "${SERVER_CPU[@]}" "$ROOT/target/profiling/graft" serve \
    --policies "$WORK/p100" --namespaces "$ROOT/bench/namespaces.yaml" \
    --listen "127.0.0.1:$PORT" --metrics-listen 127.0.0.1:0 --shutdown-grace 1s \
    >"$WORK/graft.log" 2>&1 &
GRAFT_PID=$!
for _ in $(seq 1 100); do
    (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.1
done
CA="/tmp/graft-ca-$PORT.pem"

drive() {
    "${LOAD_CPU[@]}" oha --no-tui --output-format json -z "$1s" -c "$CONNECTIONS" \
        --cacert "$CA" -m POST -T application/json -D "$BODY" -q "$RATE" --latency-correction \
        "https://127.0.0.1:$PORT/mutate?timeout=10s" >"$WORK/oha.json"
}
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }

# A warm-up, so the blocking pool's threads exist and the caches are filled; then the CPU
# per request, measured without perf (whose unwinding the sampled process pays for).
drive 2
before=$(cpu_ticks "$GRAFT_PID")
drive "$DURATION"
after=$(cpu_ticks "$GRAFT_PID")
rps=$(jq -r '.summary.requestsPerSec' "$WORK/oha.json")
non200=$(jq -r '[.statusCodeDistribution | to_entries[] | select(.key != "200") | .value] | add // 0' "$WORK/oha.json")
cpu_us=$(awk -v a="$before" -v b="$after" -v hz="$(getconf CLK_TCK)" -v r="$rps" -v s="$DURATION" \
    'BEGIN {printf "%.1f", (b - a) * 1000000 / hz / (r * s)}')
perf record --quiet -F 999 --call-graph dwarf,16384 -p "$GRAFT_PID" -o "$WORK/perf.data" \
    -- sleep "$DURATION" 2>/dev/null &
PERF_PID=$!
drive "$DURATION"
wait "$PERF_PID"

echo "# graft serve, 100 policies, $RATE req/s for ${DURATION}s (got $(printf '%.0f' "$rps"), $non200 non-200)," \
     "log at $GRAFT_LOG, $([ "$PIN" = 1 ] && echo "graft on CPU 0, oha on CPU 1" || echo "not pinned");" \
     "server CPU $cpu_us µs per request"
echo
# One sample a paragraph: a header line, then its stack, innermost frame first. A sample is
# charged to the first part, in this order, that its stack names (frames carry the types
# of generic code, so every frame under the connection's task names hyper and rustls).
perf script -i "$WORK/perf.data" 2>/dev/null | awk -v cpu="$cpu_us" '
    function has(words,    w, k, i) {
        k = split(words, w, ";")
        for (i = 1; i <= k; i++) if (index($0, w[i])) return 1
        return 0
    }
    BEGIN { RS = "" }
    {
        total++
        split($0, line, "\n")
        leaf = line[2]
        if (has("parse_lean")) part = "parse (admission::parse_lean)"
        else if (has("admission::answer")) part = "evaluation and response (admission::answer)"
        else if (has("to_json")) part = "response JSON (Reviewed::to_json)"
        else if (has("routes::record")) part = "log line and metrics (routes::record)"
        else if (has("blocking::pool") && has("drop_in_place")) part = "freeing the review"
        else if (has("tracing_")) part = "tracing: the review span"
        else if (has("blocking::pool;futex")) part = "hand-off to the blocking pool and back"
        else if (index(leaf, "ring_core")) part = "AES-GCM (ring)"
        else if (has("hyper;tokio")) part = "the connection: TLS records, HTTP, socket I/O, timers"
        else part = "other"
        count[part]++
    }
    END {
        n = split("parse (admission::parse_lean)|evaluation and response (admission::answer)|response JSON (Reviewed::to_json)|log line and metrics (routes::record)|freeing the review|tracing: the review span|hand-off to the blocking pool and back|AES-GCM (ring)|the connection: TLS records, HTTP, socket I/O, timers|other", order, "|")
        print "| part | share of samples | µs per request |"
        print "|---|---:|---:|"
        for (i = 1; i <= n; i++) {
            printf "| %s | %.1f%% | %.1f |\n", order[i], 100 * count[order[i]] / total, cpu * count[order[i]] / total
        }
        printf "| all (%d samples) | 100%% | %.1f |\n", total, cpu
    }'
