#!/usr/bin/env bash
# The cost of restricting an sqlite3 source to some of its zones: authd serving
# the root zone from one sqlite3 DB, once whole (`[[datasource]]` without
# `zones`) and once restricted (`zones = ["."]`), hot-spot cache on (the
# default), over loopback UDP with dnsperf.
#
# usage: bench/restricted.sh [-l SECONDS] [--rounds N]
#
# Method: one authd with one UDP worker pinned to core 1, dnsperf pinned to
# core 0 (`-c 1 -q 100 -l SECS`), the root real and NXDOMAIN mixes from
# ../shared/data/root; the server's CPU time (utime + stime from
# /proc/PID/stat) over the run gives queries per server CPU-second. Prints one
# line per run and the restricted / whole ratio per mix and round.
#
# Environment: BENCH_AUTHD=path uses that authd (and loadzone beside it)
# instead of building target/release; SHARED=path to the shared data.
# Everything stays on loopback; authd is stopped by PID after each run.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SHARED:-$(cd "$ROOT/.." && pwd)/shared/data}
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

SECS=5
ROUNDS=1
while [ $# -gt 0 ]; do
    case "$1" in
        -l) SECS=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        *) echo "usage: $0 [-l SECONDS] [--rounds N]" >&2; exit 2 ;;
    esac
done

command -v dnsperf >/dev/null 2>&1 || {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq dnsperf >/dev/null
}
if [ -n "${BENCH_AUTHD:-}" ]; then
    AUTHD=$BENCH_AUTHD
else
    (cd "$ROOT" && cargo build --release --quiet -p authd --bin authd --bin loadzone)
    AUTHD=${CARGO_TARGET_DIR:-$ROOT/target}/release/authd
fi
LOADZONE=$(dirname "$AUTHD")/loadzone

# dnsperf sends everything from one address: rate limiting off.
export AUTHD_RRL__ENABLED=false
bench_workdir authd-restricted
query_mixes
"$LOADZONE" --db "$WORK/root.sqlite3" . "$ROOT/tests/data/root.zone" >/dev/null
printf '[server]\nudp_workers = 1\n[[datasource]]\ntype = "sqlite3"\nfile = "%s"\n' \
    "$WORK/root.sqlite3" >"$WORK/whole.toml"
printf '[server]\nudp_workers = 1\n[[datasource]]\ntype = "sqlite3"\nfile = "%s"\nzones = ["."]\n' \
    "$WORK/root.sqlite3" >"$WORK/restricted.toml"

cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# run MODE MIX: prints "queries-per-CPU-second qps".
run() {
    local port pid t0 t1 out done_q qps
    port=$(free_port)
    taskset -c 1 "$AUTHD" --config "$WORK/$1.toml" --listen "127.0.0.1:$port" \
        --log-level warn 2>"$WORK/$1.err" &
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 100); do
        dig +short +tries=1 +time=1 -p "$port" @127.0.0.1 . SOA >/dev/null 2>&1 && break
        sleep 0.05
    done
    t0=$(cpu_ticks "$pid")
    out=$(taskset -c 0 dnsperf -s 127.0.0.1 -p "$port" -d "$SHARED/root/queries-$2.txt" \
        -c 1 -q 100 -l "$SECS" 2>&1)
    t1=$(cpu_ticks "$pid")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    done_q=$(awk '/Queries completed/ { print $3 }' <<<"$out")
    qps=$(awk '/Queries per second/ { printf "%d", $4 }' <<<"$out")
    awk -v q="$done_q" -v t=$((t1 - t0)) -v hz="$hz" -v qps="$qps" \
        'BEGIN { printf "%d %d\n", q / (t / hz), qps }'
}

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); authd: $AUTHD; $SECS s per run"
for round in $(seq "$ROUNDS"); do
    for mix in real nxdomain; do
        read -r whole whole_qps < <(run whole "$mix")
        read -r restricted restricted_qps < <(run restricted "$mix")
        echo "round $round $mix: whole $whole q/CPU-s ($whole_qps qps)," \
            "restricted $restricted q/CPU-s ($restricted_qps qps)," \
            "ratio $(awk -v a="$restricted" -v b="$whole" 'BEGIN { printf "%.2f", a / b }')"
    done
done
