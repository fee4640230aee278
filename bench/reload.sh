#!/usr/bin/env bash
# Reload of a large zone under load: authd serves ZONEFILE from memory while
# dnsperf sends QUERYFILE at RATE queries/s; the zone's SOA serial is changed
# in the file and authd gets SIGHUP. Prints how long until the new serial is
# answered, the peak RSS during the reload (VmHWM reset just before the
# SIGHUP through /proc/PID/clear_refs), the RSS before and after, and
# dnsperf's counts (lost queries: "Queries lost").
#
# usage: bench/reload.sh ZONEFILE ORIGIN QUERYFILE [RATE] [SECONDS]
#   RATE     queries/s (default 5000); SECONDS of dnsperf (default 40)
#
# authd is the release build in $CARGO_TARGET_DIR (default target/). The
# zone is copied to a temp folder first; the serial must be the first
# 10-digit number of the file's SOA line.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZONE_IN=$1
ORIGIN=$2
QUERIES=$3
RATE=${4:-5000}
SECS=${5:-40}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
AUTHD=$TARGET/release/authd

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_workdir authd-reload
cp "$ZONE_IN" "$WORK/zone"
PORT=$(free_port)

soa_serial() {
    dig @127.0.0.1 -p "$PORT" "$ORIGIN" SOA +norec +tries=1 +time=1 +short 2>/dev/null |
        awk 'NF == 7 && $1 !~ /^;/ { print $3 }'
}
kib() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }

"$AUTHD" --zone "$ORIGIN=$WORK/zone" --listen "127.0.0.1:$PORT" --log-level info \
    >"$WORK/authd.log" 2>&1 &
pid=$!
PIDS+=("$pid")
until [ -n "$(soa_serial)" ]; do
    kill -0 "$pid"
    sleep 0.05
done
old=$(soa_serial)
echo "loaded: serial $old, RSS $(kib "$pid" VmRSS) kB, peak $(kib "$pid" VmHWM) kB"

dnsperf -s 127.0.0.1 -p "$PORT" -d "$QUERIES" -l "$SECS" -Q "$RATE" -t 2 >"$WORK/dnsperf.txt" 2>&1 &
perf_pid=$!
PIDS+=("$perf_pid")
sleep 5
before=$(kib "$pid" VmRSS)
new=$((old + 1))
# A new file (sed -i renames), as an editor or a zone signer writes one.
sed -i "0,/$old/s//$new/" "$WORK/zone"
echo 5 >"/proc/$pid/clear_refs" # resets VmHWM to the current RSS
start=$(date +%s.%N)
kill -HUP "$pid"
until [ "$(soa_serial)" = "$new" ]; do
    sleep 0.01
done
secs=$(echo "$(date +%s.%N) - $start" | bc)
sleep 1
echo "reloaded: serial $new answered after $secs s; RSS before $before kB, peak during reload $(kib "$pid" VmHWM) kB, after $(kib "$pid" VmRSS) kB"
wait "$perf_pid" || true
grep -E 'Queries (sent|completed|lost)|Response codes|Queries per second' "$WORK/dnsperf.txt"
grep -E 'loaded|reload' "$WORK/authd.log" | tail -3
