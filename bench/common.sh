# Shared by the scripts in bench/ (sourced, not run).

# Waits up to 10 s for something to listen on 127.0.0.1:$1; exits the script otherwise.
wait_for_port() {
    for _ in $(seq 1 100); do
        (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "nothing listens on 127.0.0.1:$1" >&2
    exit 1
}

# CPU time the process has used, all its threads (ended ones included), in clock ticks.
# The fields after the command name, which is in parentheses and may hold spaces.
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }

# Microseconds of CPU per request: ticks before and after a run, its req/s and seconds.
cpu_us_per_request() {
    awk -v a="$1" -v b="$2" -v r="$3" -v s="$4" -v hz="$(getconf CLK_TCK)" \
        'BEGIN {printf "%.1f", (b - a) * 1000000 / hz / (r * s)}'
}

# The EXIT trap of a script that runs one server at a time: stops the server whose PID is in
# SERVER_PID, if any, and removes the script's WORK directory.
stop_server_and_clean_up() {
    if [ -n "${SERVER_PID:-}" ]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}

# Instructions per unit of work of a probe run as `BINARY MODE N` (callgrind): the run with
# N units less the run with none, divided by N.
instructions_per_unit() {
    local out a b
    out=$(mktemp -d)
    valgrind --tool=callgrind --callgrind-out-file="$out/none" "$1" "$2" 0 >/dev/null 2>&1
    valgrind --tool=callgrind --callgrind-out-file="$out/some" "$1" "$2" "$3" >/dev/null 2>&1
    a=$(awk '/^totals:/ {print $2}' "$out/none")
    b=$(awk '/^totals:/ {print $2}' "$out/some")
    rm -rf "$out"
    echo $(((b - a) / $3))
}
