#!/usr/bin/env bash
# Where a server's CPU goes per request: graft serve (the release build with line tables,
# the `profiling` profile) serves the realistic pod with 100 policies at a fixed rate, `perf
# record` samples it with DWARF call graphs, and every sample is charged to the first part
# of the request path its stack is in. Loopback only; bounded in time.
#
#   bash bench/server_profile.sh                 # 2,000 req/s, 10 s sampled, log at info (JSON)
#   RATE=3000 DURATION=5 GRAFT_LOG=warn bash bench/server_profile.sh
#   PIN=1 bash bench/server_profile.sh           # the server on CPU 0, oha on CPU 1
#   SERVER=handwritten PIN=1 bash bench/server_profile.sh
#                                                # the hand-written webhook instead
#
# Needs perf (linux-perf), oha and jq. Prints a Markdown table: part, share of samples,
# and microseconds of CPU per request (that share of the server's CPU time per request,
# read from /proc over a run of the same length without perf, just before the sampled one).
set -euo pipefail

DURATION=${DURATION:-10}
RATE=${RATE:-2000}
CONNECTIONS=${CONNECTIONS:-16}
GRAFT_LOG=${GRAFT_LOG:-info}
# The Deployment's log format; GRAFT_LOG_FORMAT=text for `graft serve`'s default.
GRAFT_LOG_FORMAT=${GRAFT_LOG_FORMAT:-json}
PIN=${PIN:-0}
SERVER=${SERVER:-graft}
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
SERVER_PID=
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"
trap stop_server_and_clean_up EXIT

cd "$ROOT"
case "$SERVER" in
    graft)
        cargo build --profile profiling --quiet --bin graft
        cargo build --release --quiet --example gen_policies
        "$ROOT/target/release/examples/gen_policies" "$WORK/p100" 100 >/dev/null
        RUST_LOG=$GRAFT_LOG "${SERVER_CPU[@]}" "$ROOT/target/profiling/graft" serve \
            --policies "$WORK/p100" --log-format "$GRAFT_LOG_FORMAT" \
            --namespaces "$ROOT/bench/namespaces.yaml" \
            --listen "127.0.0.1:$PORT" --metrics-listen 127.0.0.1:0 --shutdown-grace 1s \
            >"$WORK/server.log" 2>&1 &
        CA="/tmp/graft-ca-$PORT.pem"
        ;;
    handwritten)
        cargo build --profile profiling --quiet --example handwritten_webhook
        # It stops by itself after the warm-up and both runs, if nothing stops it first.
        "${SERVER_CPU[@]}" "$ROOT/target/profiling/examples/handwritten_webhook" \
            "127.0.0.1:$PORT" "$WORK/ca.pem" $((DURATION * 2 + 30)) >"$WORK/server.log" 2>&1 &
        CA="$WORK/ca.pem"
        ;;
    *) echo "SERVER is graft or handwritten, not $SERVER" >&2; exit 1 ;;
esac
SERVER_PID=$!
wait_for_port "$PORT"

drive() {
    "${LOAD_CPU[@]}" oha --no-tui --output-format json -z "$1s" -c "$CONNECTIONS" \
        --cacert "$CA" -m POST -T application/json -D "$BODY" -q "$RATE" --latency-correction \
        "https://127.0.0.1:$PORT/mutate?timeout=10s" >"$WORK/oha.json"
}

# A warm-up, so the evaluation pool's threads exist and the caches are filled; then the CPU
# per request, measured without perf (whose unwinding the sampled process pays for).
drive 2
before=$(cpu_ticks "$SERVER_PID")
drive "$DURATION"
after=$(cpu_ticks "$SERVER_PID")
rps=$(jq -r '.summary.requestsPerSec' "$WORK/oha.json")
non200=$(jq -r '[.statusCodeDistribution | to_entries[] | select(.key != "200") | .value] | add // 0' "$WORK/oha.json")
cpu_us=$(cpu_us_per_request "$before" "$after" "$rps" "$DURATION")
perf record --quiet -F 999 --call-graph dwarf,16384 -p "$SERVER_PID" -o "$WORK/perf.data" \
    -- sleep "$DURATION" 2>/dev/null &
PERF_PID=$!
drive "$DURATION"
wait "$PERF_PID"

case "$SERVER" in
    graft) what="graft serve, 100 policies, log at $GRAFT_LOG ($GRAFT_LOG_FORMAT)" ;;
    handwritten) what="the hand-written webhook (examples/handwritten_webhook.rs)" ;;
esac
echo "# $what, $RATE req/s for ${DURATION}s (got $(printf '%.0f' "$rps"), $non200 non-200)," \
     "$([ "$PIN" = 1 ] && echo "the server on CPU 0, oha on CPU 1" || echo "not pinned");" \
     "server CPU $cpu_us µs per request"
echo
# One sample a paragraph: a header line, then its stack, innermost frame first. A sample is
# charged to the first part, in this order, that its stack names (frames carry the types
# of generic code, so every frame under the connection's task names hyper and rustls).
# The hand-written webhook's review is inlined into its handler: its parts are told by the
# crates its frames are in.
perf script -i "$WORK/perf.data" 2>/dev/null | awk -v cpu="$cpu_us" -v server="$SERVER" '
    function has(words,    w, k, i) {
        k = split(words, w, ";")
        for (i = 1; i <= k; i++) if (index($0, w[i])) return 1
        return 0
    }
    BEGIN {
        RS = ""
        if (server == "graft") {
            order = "parse (admission::parse)|evaluation and response (admission::answer)|response JSON (Reviewed::to_json)|log line and metrics (routes::record)|freeing the review|tracing: the review span|hand-off to the evaluation pool and back (its switches and wake-ups)|AES-GCM (ring)|the connection: TLS records, HTTP, socket I/O, timers|other"
        } else {
            order = "the review: parse, rule, response, freeing it (serde_json, base64, handwritten_review)|AES-GCM (ring)|the connection: TLS records, HTTP, socket I/O, timers|other"
        }
    }
    {
        total++
        split($0, line, "\n")
        leaf = line[2]
        if (server != "graft") {
            if (has("serde_json;handwritten_review;base64")) part = "the review: parse, rule, response, freeing it (serde_json, base64, handwritten_review)"
            else if (index(leaf, "ring_core")) part = "AES-GCM (ring)"
            else if (has("hyper;tokio")) part = "the connection: TLS records, HTTP, socket I/O, timers"
            else part = "other"
        }
        else if (has("parse_lean;admission::parse::")) part = "parse (admission::parse)"
        else if (has("admission::answer")) part = "evaluation and response (admission::answer)"
        else if (has("to_json")) part = "response JSON (Reviewed::to_json)"
        else if (has("routes::record")) part = "log line and metrics (routes::record)"
        else if (has("evaluation_pool") && has("drop_in_place")) part = "freeing the review"
        else if (has("tracing_")) part = "tracing: the review span"
        else if (has("evaluation_pool;futex")) part = "hand-off to the evaluation pool and back (its switches and wake-ups)"
        else if (index(leaf, "ring_core")) part = "AES-GCM (ring)"
        else if (has("hyper;tokio")) part = "the connection: TLS records, HTTP, socket I/O, timers"
        else part = "other"
        count[part]++
    }
    END {
        n = split(order, parts, "|")
        print "| part | share of samples | µs per request |"
        print "|---|---:|---:|"
        for (i = 1; i <= n; i++) {
            printf "| %s | %.1f%% | %.1f |\n", parts[i], 100 * count[parts[i]] / total, cpu * count[parts[i]] / total
        }
        printf "| all (%d samples) | 100%% | %.1f |\n", total, cpu
    }'
