#!/usr/bin/env bash
# Dynamic updates a second: N UPDATEs (default 500), each adding one A RR,
# sent by one nsupdate (unsigned, UDP, each waiting for its reply) to a
# release authd serving the zone from a fresh sqlite3 DB (loadzone), with an
# address-only `[update] allow`, on 127.0.0.1. docs/performance-log.md,
# "Dynamic updates: one client, one record each".
#
# usage: bench/update.sh [-n N] [-r ROUNDS] [-b] [-s] [small|root]...
#   small  example.com. from auth/src/default/example.com.zone (78 RRs)
#   root   tests/data/root.zone without its DNSSEC RRs (and DS): 14,824 RRs
#   -n N       updates a round (default 500)
#   -r ROUNDS  rounds a zone, each on a fresh DB (default 3); the median is printed
#   -b         the same against BIND 9 (named, allow-update, its .jnl journal) too
#   -s         the zone signed online: authd with [[signing.zone]] (CSK ECDSA P-256,
#              NSEC), BIND with a dnssec-policy of the same (dnssec-policy default but
#              for max-zone-ttl, which the root zone's 6-day TTLs exceed); each update
#              signed before its reply; the round starts once the first signing is served
#   -3         with -s: NSEC3 (no opt-out, no salt, 0 iterations) on both
#
# BIND is asked for with -b (named must be installed: apt-get install bind9).
# authd, loadzone are the release builds in $CARGO_TARGET_DIR (default
# target/), or $BENCH_AUTHD / $BENCH_LOADZONE. Prints one line a round and a
# median line a zone. Work files are in a temp folder (removed on exit).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
AUTHD=${BENCH_AUTHD:-$TARGET/release/authd}
LOADZONE=${BENCH_LOADZONE:-$TARGET/release/loadzone}
N=500
ROUNDS=3
BIND=0
SIGNED=0
NSEC3=0
while getopts n:r:bs3 opt; do
    case $opt in
    n) N=$OPTARG ;;
    r) ROUNDS=$OPTARG ;;
    b) BIND=1 ;;
    s) SIGNED=1 ;;
    3) NSEC3=1 ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- small root

for tool in nsupdate dig; do
    command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install dnsutils)" >&2; exit 2; }
done
for bin in "$AUTHD" "$LOADZONE"; do
    [ -x "$bin" ] || { echo "missing $bin: cargo build --release" >&2; exit 2; }
done

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_workdir authd-update

awk '$4 == "SOA" || $4 == "NS" || $4 == "A" || $4 == "AAAA"' \
    "$ROOT/tests/data/root.zone" >"$WORK/root.zone"

# start_authd ORIGIN ZONEFILE PORT: a fresh DB and authd on it; sets pid.
start_authd() {
    local origin=$1 file=$2 port=$3
    rm -f "$WORK"/zones.sqlite3*
    "$LOADZONE" --db "$WORK/zones.sqlite3" "$origin" "$file" >/dev/null
    cat >"$WORK/authd.toml" <<CONF
[[datasource]]
type = "sqlite3"
file = "$WORK/zones.sqlite3"
[update]
allow = ["127.0.0.1/32"]
CONF
    if [ "$SIGNED" = 1 ]; then
        local denial=nsec
        [ "$NSEC3" = 1 ] && denial=nsec3
        printf '[signing]\ndenial = "%s"\n[[signing.zone]]\norigin = "%s"\n' "$denial" "$origin" >>"$WORK/authd.toml"
    fi
    "$AUTHD" --config "$WORK/authd.toml" --listen "127.0.0.1:$port" --log-level warn >"$WORK/server.log" 2>&1 &
    pid=$!
}

# start_named ORIGIN ZONEFILE PORT: a fresh zone file and journal and named on them; sets pid.
start_named() {
    local origin=$1 file=$2 port=$3
    rm -rf "$WORK/named" && mkdir -p "$WORK/named"
    local policy="" policy_def=""
    if [ "$SIGNED" = 1 ]; then
        policy='dnssec-policy bench; key-directory "'"$WORK/named"'";'
        local nsec3=""
        [ "$NSEC3" = 1 ] && nsec3="nsec3param iterations 0 optout no salt-length 0;"
        policy_def="dnssec-policy bench { keys { csk lifetime unlimited algorithm ecdsap256sha256; }; max-zone-ttl 7d; $nsec3 };"
    fi

    cp "$file" "$WORK/named/zone.db"
    cat >"$WORK/named/named.conf" <<CONF
options {
    directory "$WORK/named";
    listen-on port $port { 127.0.0.1; };
    listen-on-v6 { none; };
    pid-file "$WORK/named/named.pid";
    recursion no;
    notify no;
};
$policy_def
zone "$origin" { type primary; file "zone.db"; allow-update { 127.0.0.1; }; $policy };
CONF
    named -g -c "$WORK/named/named.conf" >"$WORK/server.log" 2>&1 &
    pid=$!
}

# one_round SERVER ORIGIN ZONEFILE: prints the seconds N updates took.
one_round() {
    local server=$1 origin=$2 file=$3 port t0 t1
    port=$(free_port)
    "start_$server" "$origin" "$file" "$port"
    PIDS+=("$pid")
    local tries=0
    local ready=SOA
    [ "$SIGNED" = 1 ] && ready=RRSIG
    until dig @127.0.0.1 -p "$port" "$origin" SOA +norec +dnssec +tries=1 +time=1 2>/dev/null | grep -q "IN[[:space:]]*$ready"; do
        tries=$((tries + 1))
        [ "$tries" -lt 600 ] && kill -0 "$pid" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
        sleep 0.1
    done
    local suffix=${origin%.}
    {
        echo "server 127.0.0.1 $port"
        echo "zone $origin"
        for i in $(seq 1 "$N"); do
            echo "update add bench-$i${suffix:+.$suffix}. 300 A 192.0.2.$((i % 250 + 1))"
            echo "send"
        done
    } >"$WORK/updates.txt"
    t0=$(date +%s.%N)
    nsupdate "$WORK/updates.txt"
    t1=$(date +%s.%N)
    # The last update is served.
    local count
    count=$(dig @127.0.0.1 -p "$port" "bench-$N${suffix:+.$suffix}." A +norec +short | wc -l)
    [ "$count" -eq 1 ] || { echo "the last update is not served" >&2; exit 1; }
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    echo "$t1 - $t0" | bc -l
}

servers=(authd)
[ "$BIND" = 1 ] && servers+=(named)
for which in "$@"; do
    case $which in
    small) origin=example.com. file=$ROOT/auth/src/default/example.com.zone ;;
    root) origin=. file=$WORK/root.zone ;;
    *) echo "unknown zone $which (small|root)" >&2; exit 2 ;;
    esac
    # Servers alternate round by round, so they share the machine's moods.
    declare -A times=()
    for r in $(seq 1 "$ROUNDS"); do
        for server in "${servers[@]}"; do
            s=$(one_round "$server" "$origin" "$file")
            times[$server]+="$s "
            printf '%s %s round %d: %.2f s, %.0f updates/s\n' "$server" "$which" "$r" "$s" "$(echo "$N / $s" | bc -l)"
        done
    done
    for server in "${servers[@]}"; do
        # shellcheck disable=SC2086
        med=$(printf '%s\n' ${times[$server]} | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
        printf '%s %s median of %d: %.2f s, %.0f updates/s\n' "$server" "$which" "$ROUNDS" "$med" "$(echo "$N / $med" | bc -l)"
    done
    unset times
done
