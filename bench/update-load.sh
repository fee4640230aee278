#!/usr/bin/env bash
# Query capacity while dynamic updates stream in (issue 24: a commit must not
# empty the whole hot-spot cache). A release authd (one UDP worker, pinned to
# core 1) serves the root zone and example.com. from one sqlite3 DB with the
# hot-spot cache (the default); dnsperf (core 0) sends the root zone's real
# query mix as fast as it is answered, in three runs of SECS seconds each:
#   none      no updates
#   other     RATE UPDATEs a second into example.com. (bench/update_load.py,
#             core 0: each adds or deletes one TXT RR): the queried zone is
#             untouched, so its cache entries should all stay
#   same      RATE UPDATEs a second into the root zone itself (`[update]
#             dnssec = true`, it is signed): every one drops the root
#             zone's entries, which the queries then refill
# Prints each run's queries/s, queries per second of authd's CPU, average
# latency and update counts, and the ratio of each run to `none`. docs/performance-log.md, "Queries under updates".
#
# usage: bench/update-load.sh [-l SECS] [-r RATE] [-n ROUNDS]
#   -l SECS    seconds per run (default 10)
#   -r RATE    UPDATEs a second (default 50)
#   -n ROUNDS  repeats of the three runs, interleaved (default 2)
# authd and loadzone are the release builds in $CARGO_TARGET_DIR (default
# target/), or $BENCH_AUTHD / $BENCH_LOADZONE; dnsperf from Debian's package.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
AUTHD=${BENCH_AUTHD:-$TARGET/release/authd}
LOADZONE=${BENCH_LOADZONE:-$TARGET/release/loadzone}
SHARED=${SHARED:-$ROOT/../shared/data}
SECS=10
RATE=50
ROUNDS=2
while getopts l:r:n: opt; do
    case $opt in
    l) SECS=$OPTARG ;;
    r) RATE=$OPTARG ;;
    n) ROUNDS=$OPTARG ;;
    *) exit 2 ;;
    esac
done

command -v dnsperf >/dev/null || { echo "needs dnsperf (apt-get install dnsperf)" >&2; exit 2; }
for bin in "$AUTHD" "$LOADZONE"; do
    [ -x "$bin" ] || { echo "missing $bin: cargo build --release" >&2; exit 2; }
done

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_workdir authd-update-load
query_mixes

DB=$WORK/zones.sqlite3
"$LOADZONE" --db "$DB" . "$ROOT/tests/data/root.zone" >/dev/null
"$LOADZONE" --db "$DB" example.com. "$ROOT/examples/example.com.zone" >/dev/null
PORT=$(free_port)
cat >"$WORK/authd.toml" <<CONF
listen = ["127.0.0.1:$PORT"]
[server]
udp_workers = 1
[[datasource]]
type = "sqlite3"
file = "$DB"
[update]
allow = ["127.0.0.1/32"]
# The root zone is signed: its updates would be REFUSED without this (the
# stale signatures do not matter to a throughput run).
dnssec = true
[rrl]
enabled = false
CONF
taskset -c 1 "$AUTHD" --config "$WORK/authd.toml" --log-level warn >"$WORK/authd.log" 2>&1 &
APID=$!
PIDS+=("$APID")
HZ=$(getconf CLK_TCK)

# authd's utime+stime in ticks (fields 14 and 15 of /proc/PID/stat, counted
# after the ')' that ends the command name).
cpu_ticks() {
    local rest
    rest=$(cut -d')' -f2- "/proc/$APID/stat")
    awk '{ print $12 + $13 }' <<<"$rest"
}
for _ in $(seq 50); do
    dig +time=1 +tries=1 -p "$PORT" @127.0.0.1 . SOA +short >/dev/null 2>&1 && break
    sleep 0.2
done

# run NAME ZONE: one dnsperf run, with updates into ZONE unless it is "-".
run() {
    local name=$1 zone=$2 upid="" out ups=""
    if [ "$zone" != - ]; then
        taskset -c 0 python3 "$ROOT/bench/update_load.py" 127.0.0.1 "$PORT" "$zone" "$RATE" "$SECS" \
            >"$WORK/updates.txt" &
        upid=$!
        PIDS+=("$upid")
    fi
    local t0 t1
    t0=$(cpu_ticks)
    out=$(taskset -c 0 dnsperf -s 127.0.0.1 -p "$PORT" -d "$SHARED/root/queries-real.txt" \
        -l "$SECS" -c 1 -q 100 2>&1)
    t1=$(cpu_ticks)
    if [ -n "$upid" ]; then
        wait "$upid" || true
        ups=$(cat "$WORK/updates.txt")
    fi
    local qps lat done per_cpu
    qps=$(awk '/Queries per second:/ {print $4}' <<<"$out")
    lat=$(awk '/Average Latency/ {print $4}' <<<"$out")
    done=$(awk '/Queries completed:/ {print $3}' <<<"$out")
    # Queries answered per second of authd's CPU (user + system, every
    # thread, the UPDATE writer's included): capacity as the machine's
    # other load does not change it.
    per_cpu=$(awk -v q="$done" -v t=$((t1 - t0)) -v hz="$HZ" 'BEGIN { printf "%.0f", t ? q * hz / t : 0 }')
    printf '%-6s %12s q/s  %8s q/CPU-s  latency %s s  %s\n' "$name" "$qps" "$per_cpu" "$lat" "$ups"
    echo "$name $qps $per_cpu" >>"$WORK/results"
}

echo "authd $("$AUTHD" --version | awk '{print $2}'), root zone + example.com. in one sqlite3 DB, cache on; $RATE UPDATEs/s; dnsperf -c 1 -q 100 -l $SECS; load average $(cut -d' ' -f1-3 /proc/loadavg)"
# Warm the cache first: the first run would otherwise pay for filling it.
taskset -c 0 dnsperf -s 127.0.0.1 -p "$PORT" -d "$SHARED/root/queries-real.txt" -l 3 -c 1 -q 100 \
    >/dev/null 2>&1
for _ in $(seq "$ROUNDS"); do
    run none -
    run other example.com.
    run same .
done
awk '{sum[$1] += $2; cpu[$1] += $3; n[$1]++} END {
    base = sum["none"] / n["none"]; cbase = cpu["none"] / n["none"];
    for (k in sum) printf "%-6s mean %.0f q/s = %.3f x none; %.0f q/CPU-s = %.3f x none\n", k, sum[k] / n[k], (sum[k] / n[k]) / base, cpu[k] / n[k], (cpu[k] / n[k]) / cbase
}' "$WORK/results" | sort
grep -i "error\|panic" "$WORK/authd.log" | head -5 || true
