#!/usr/bin/env bash
# Load time and resident memory of one zone served from memory by authd
# (--zone ORIGIN=FILE), NSD and Knot DNS, in one run.
#
# usage: bench/memory.sh [ZONEFILE] [ORIGIN]
#   ZONEFILE  default tests/data/root.zone (copied to a temp folder first)
#   ORIGIN    default "."
#
# Large zones (issue 20): a TLD-like zone from bench/make_tld.py, e.g.
#   bench/make_tld.py --delegations 300000 /tmp/tld-300k
#   BENCH_AUTHD=target/release/authd bench/memory.sh /tmp/tld-300k/zone tld.
# (1,000,000 delegations, the generator's default: about 140 MB of zone file;
# on the 2-core test machine each server then took 15-55 s to load and up to
# 1.4-1.6 GiB resident, see docs/performance-log.md; nothing here times out on a
# slow load.)
#
# For each server: the load time is from start until the first successful
# "ORIGIN SOA" answer over UDP (dig with a 1 s timeout, polled every 10 ms);
# the memory is VmRSS from /proc/PID/status summed over the server's processes
# (NSD forks), read 1 s after that first answer; PSS (from smaps_rollup) counts
# pages shared between those processes once; VmHWM is the summed peak RSS.
#
# Servers run on 127.0.0.1 only, on free unprivileged ports, with their own
# configuration and folders under a temp folder, and are stopped by PID.
# NSD and Knot are installed with apt-get when missing; authd is the release
# build in $CARGO_TARGET_DIR (default target/), built if missing, or the
# binary BENCH_AUTHD=path names (no build).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZONE_IN=${1:-$ROOT/tests/data/root.zone}
ORIGIN=${2:-.}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
AUTHD=${BENCH_AUTHD:-$TARGET/release/authd}

if ! command -v nsd >/dev/null || ! command -v knotd >/dev/null || ! command -v dig >/dev/null; then
    echo "installing nsd, knot, dnsutils with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y nsd knot dnsutils >/dev/null
fi
if [ ! -x "$AUTHD" ] && [ -z "${BENCH_AUTHD:-}" ]; then
    echo "building $AUTHD" >&2
    (cd "$ROOT" && cargo build --release -p authd --bin authd)
fi

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_workdir authd-bench
cp "$ZONE_IN" "$WORK/zone"
ZONE=$WORK/zone

now() { date +%s.%N; }

# Sum of a /proc/PID/$3 field (kB; default file status) over the process tree of $1.
sum_status() {
    local pid=$1 field=$2 file=${3:-status} total=0 v
    for p in $(tree "$pid"); do
        v=$(awk -v f="$field:" '$1 == f { print $2 }' "/proc/$p/$file" 2>/dev/null || true)
        total=$((total + ${v:-0}))
    done
    echo "$total"
}

# Waits until "ORIGIN SOA" is answered on 127.0.0.1:$2 (or $1 died); prints seconds since $3.
wait_soa() {
    local pid=$1 port=$2 start=$3
    while kill -0 "$pid" 2>/dev/null; do
        # Only an SOA record in the answer counts (dig prints errors on stdout too).
        if dig @127.0.0.1 -p "$port" "$ORIGIN" SOA +norec +tries=1 +time=1 +noall +answer 2>/dev/null |
            grep -qP '\tIN\tSOA\t'; then
            echo "$(now) - $start" | bc
            return 0
        fi
        sleep 0.01
    done
    echo "server $pid exited before answering" >&2
    return 1
}

RESULTS=()
measure() {
    local name=$1 port=$2 log=$3
    shift 3
    local start pid secs rss hwm pss
    start=$(now)
    "$@" >"$log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    if ! secs=$(wait_soa "$pid" "$port" "$start"); then
        tail -20 "$log" >&2
        RESULTS+=("| $name | failed | | | |")
        return
    fi
    sleep 1
    rss=$(sum_status "$pid" VmRSS)
    hwm=$(sum_status "$pid" VmHWM)
    pss=$(sum_status "$pid" Pss smaps_rollup)
    RESULTS+=("$(printf '| %s | %.2f | %.1f | %.1f | %.1f |' "$name" "$secs" "$(echo "$rss / 1024" | bc -l)" "$(echo "$pss / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)")")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

# --- authd
PORT=$(free_port)
measure "authd $("$AUTHD" --version | awk '{print $2}') (memory)" "$PORT" "$WORK/authd.log" \
    "$AUTHD" --zone "$ORIGIN=$ZONE" --listen "127.0.0.1:$PORT" --log-level warn

# --- NSD
PORT=$(free_port)
mkdir -p "$WORK/nsd"
cat >"$WORK/nsd/nsd.conf" <<EOF
server:
    ip-address: 127.0.0.1
    port: $PORT
    do-ip6: no
    username: ""
    chroot: ""
    zonesdir: "$WORK/nsd"
    database: ""
    zonelistfile: "$WORK/nsd/zone.list"
    xfrdfile: "$WORK/nsd/xfrd.state"
    xfrdir: "$WORK/nsd"
    pidfile: "$WORK/nsd/nsd.pid"
    logfile: "$WORK/nsd/nsd.log"
    server-count: 1
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
remote-control:
    control-enable: no
zone:
    name: "$ORIGIN"
    zonefile: "$ZONE"
EOF
measure "NSD $(nsd -v 2>&1 | awk 'NR==1 {print $3}')" "$PORT" "$WORK/nsd/stderr" \
    nsd -d -c "$WORK/nsd/nsd.conf"

# --- Knot DNS
PORT=$(free_port)
mkdir -p "$WORK/knot"
cat >"$WORK/knot/knot.conf" <<EOF
server:
    rundir: "$WORK/knot"
    listen: 127.0.0.1@$PORT
log:
  - target: stderr
    any: warning
database:
    storage: "$WORK/knot"
zone:
  - domain: "$ORIGIN"
    file: "$ZONE"
    storage: "$WORK/knot"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
EOF
measure "Knot DNS $(knotd -V | awk '{print $NF}')" "$PORT" "$WORK/knot/stderr" \
    knotd -c "$WORK/knot/knot.conf"

echo
echo "zone: $ZONE_IN ($(wc -c <"$ZONE_IN") bytes, $(grep -vc '^\s*\(;\|$\)' "$ZONE_IN") lines of records)"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); nproc: $(nproc); CPU: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
echo
echo "| server | load time (s) | RSS (MiB) | PSS (MiB) | peak RSS (MiB) |"
echo "|---|---|---|---|---|"
printf '%s\n' "${RESULTS[@]}"
