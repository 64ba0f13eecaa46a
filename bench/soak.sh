#!/usr/bin/env bash
# Soak test: steady TLS keep-alive load on the release `graft serve`, while the policy
# ConfigMap and the serving-certificate Secret are swapped kubelet-style (a new
# timestamped directory, then an atomic rename of `..data`). Loopback only.
#
#   bench/soak.sh [--duration SECONDS] [--connections N] [--threads N]
#   SOAK_DURATION=180 bench/soak.sh
#
# Defaults: 600 s, 16 connections, 2 threads. Needs `wrk` (apt-get install wrk) and openssl.
# Passes when wrk saw zero socket errors and zero non-2xx responses; prints VmRSS and the
# open fd count of the server at start and end.
set -euo pipefail

duration="${SOAK_DURATION:-600}"
connections="${SOAK_CONNECTIONS:-16}"
threads="${SOAK_THREADS:-2}"
policy_every="${SOAK_POLICY_EVERY:-2}"
cert_every="${SOAK_CERT_EVERY:-30}"
while [ $# -gt 0 ]; do
    case "$1" in
        --duration) duration="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done

repo="$(cd "$(dirname "$0")/.." && pwd)"
command -v wrk >/dev/null || { echo "wrk not found: apt-get install -y wrk" >&2; exit 2; }
cargo build --release --manifest-path "$repo/Cargo.toml" --quiet
graft="$repo/target/release/graft"
work="$(mktemp -d /tmp/graft-soak.XXXXXX)"
server_pid=""
swapper_pid=""
cleanup() {
    [ -n "$swapper_pid" ] && kill "$swapper_pid" 2>/dev/null || true
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# kubelet-style projection: DIR/..data -> ..<stamp>/, DIR/<file> -> ..data/<file>.
generation=0
project() { # project DIR SOURCE_DIR
    local dir="$1" source="$2" stamp
    generation=$((generation + 1))
    stamp="..$(date +%Y_%m_%d_%H_%M_%S).$generation"
    mkdir -p "$dir/$stamp"
    cp "$source"/* "$dir/$stamp/"
    ln -sfn "$stamp" "$dir/..data_tmp"
    mv -T "$dir/..data_tmp" "$dir/..data"
    for file in "$source"/*; do
        local name; name="$(basename "$file")"
        [ -L "$dir/$name" ] || ln -s "..data/$name" "$dir/$name"
    done
    # Keep only the newest two generations, as kubelet does.
    find "$dir" -maxdepth 1 -name '..20*' -type d | sort | head -n -2 | xargs -r rm -rf
}

new_cert() { # new_cert OUT_DIR
    mkdir -p "$1"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
        -subj "/CN=graft.graft.svc" -addext "subjectAltName=DNS:graft.graft.svc,IP:127.0.0.1" \
        -keyout "$1/tls.key" -out "$1/tls.crt" 2>/dev/null
}

# Two policy sets that differ in one parameter, so every swap is a real change.
mkdir -p "$work/policies-a" "$work/policies-b" "$work/policies" "$work/tls"
cp "$repo"/policies/*.yaml "$work/policies-a/"
cp "$repo"/policies/*.yaml "$work/policies-b/"
sed -i 's/networkNamespace: rdma-networks/networkNamespace: rdma-networks-b/' "$work/policies-b/multus-networks.yaml"
project "$work/policies" "$work/policies-a"
new_cert "$work/cert-0"
project "$work/tls" "$work/cert-0"

port="${SOAK_PORT:-18443}"
metrics_port="${SOAK_METRICS_PORT:-18080}"
RUST_LOG="${RUST_LOG:-warn}" "$graft" serve --policies "$work/policies" \
    --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$metrics_port" \
    --tls-cert "$work/tls/tls.crt" --tls-key "$work/tls/tls.key" \
    >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$metrics_port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -sf "http://127.0.0.1:$metrics_port/readyz" >/dev/null || { cat "$work/server.log"; exit 1; }

sample() { # prints "rss_kb fds"
    local rss fds
    rss="$(awk '/^VmRSS/ {print $2}' "/proc/$server_pid/status")"
    fds="$(ls "/proc/$server_pid/fd" | wc -l)"
    echo "$rss $fds"
}

export body_file="$repo/tests/fixtures/pod-create-multus-worker.json"
# Warm up (connections, allocator, first TLS sessions) before the start sample.
wrk -t1 -c"$connections" -d3s -s "$repo/bench/post.lua" "https://127.0.0.1:$port/mutate" \
    >/dev/null 2>&1 || true
read -r rss_start fds_start < <(sample)

(
    set +e
    elapsed=0 certs=0
    while [ "$elapsed" -lt "$duration" ]; do
        sleep "$policy_every"
        elapsed=$((elapsed + policy_every))
        if [ $((elapsed / policy_every % 2)) -eq 0 ]; then
            project "$work/policies" "$work/policies-a"
        else
            project "$work/policies" "$work/policies-b"
        fi
        if [ $((elapsed % cert_every)) -lt "$policy_every" ]; then
            echo "${elapsed}s $(sample)" >>"$work/samples"
            certs=$((certs + 1))
            new_cert "$work/cert-$certs"
            project "$work/tls" "$work/cert-$certs"
        fi
    done
) &
swapper_pid=$!

echo "soak: ${duration}s, $connections connections, $threads threads, policies every ${policy_every}s, certificate every ${cert_every}s"
wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -s "$repo/bench/post.lua" \
    "https://127.0.0.1:$port/mutate" | tee "$work/wrk.txt"
kill "$swapper_pid" 2>/dev/null || true
wait "$swapper_pid" 2>/dev/null || true
swapper_pid=""
read -r rss_end fds_end < <(sample)

requests="$(awk '/requests in/ {print $1}' "$work/wrk.txt")"
non2xx="$(awk '/Non-2xx/ {print $NF}' "$work/wrk.txt")"
socket_errors="$(awk -F'[ ,]+' '/Socket errors/ {print $4+$6+$8+$10}' "$work/wrk.txt")"
metrics="$(curl -s "http://127.0.0.1:$metrics_port/metrics" || true)"
tls_reloads="$(grep -E '^graft_tls_reloads' <<<"$metrics" | tr '\n' ' ' || true)"
policy_loads="$(grep -E '^graft_polic(y|ies)_(reloads|set|loaded)' <<<"$metrics" | tr '\n' ' ' || true)"
kill -0 "$server_pid" 2>/dev/null || { echo "FAIL: the server died"; cat "$work/server.log"; exit 1; }
echo
echo "requests:        ${requests:-0}"
echo "non-2xx:         ${non2xx:-0}"
echo "socket errors:   ${socket_errors:-0}"
echo "VmRSS (KiB):     $rss_start -> $rss_end"
echo "open fds:        $fds_start -> $fds_end"
echo "tls reloads:     ${tls_reloads:-none reported}"
echo "policy metrics:  ${policy_loads:-none reported}"
echo "server log lines at warn+: $(wc -l <"$work/server.log")"
# The distinct messages, without timestamps, most frequent first.
sed -E 's/^[^ ]+ +//' "$work/server.log" | cut -c1-160 | sort | uniq -c | sort -rn | head -n 5
echo "samples (elapsed, VmRSS KiB, fds):"
sed 's/^/  /' "$work/samples" 2>/dev/null || true
if [ "${non2xx:-0}" != "0" ] || [ "${socket_errors:-0}" != "0" ] || [ "${requests:-0}" = "0" ]; then
    echo "FAIL"
    tail -n 20 "$work/server.log"
    exit 1
fi
echo "PASS"
