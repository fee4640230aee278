#!/usr/bin/env bash
# Amplification under attack: authd, NSD and Knot DNS, each with its default
# settings, serving the signed root zone (tests/data/root.zone), while one
# source (as a spoofed victim address would be) sends a burst of `. DNSKEY`
# queries with DO and a client in another /24 keeps asking for `. SOA`.
#
# usage: bench/abuse.sh [-n QUERIES] [--servers "authd nsd knot"]
#
# Per server it prints: the burst's queries and bytes sent, the replies and
# bytes that came back (full, truncated), bytes out per byte in (the
# amplification a spoofed victim would receive), and the share of the other
# client's queries answered (over UDP, each given 1 s; a truncated reply
# counts as answered only after its TCP retry succeeds).
#
# Method: each server alone on 127.0.0.1 with an unprivileged port, one
# worker, pinned to core 1; the load tool (python3, standard library) on core
# 0: the burst from 127.0.0.1 as fast as one socket sends (default 10,000
# queries), the other client from 127.1.0.1 (another /24) at 100 queries/s
# for the burst's duration plus 1 s. NSD and Knot DNS get a minimal config
# (zone, port, paths) and nothing about rate limiting: their defaults.
#
# Environment: BENCH_AUTHD=path uses that authd instead of building
# target/release. Everything stays on loopback; servers are stopped by PID.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

N=10000
SERVERS="authd nsd knot"
while [ $# -gt 0 ]; do
    case "$1" in
        -n) N=$2; shift 2 ;;
        --servers) SERVERS=$2; shift 2 ;;
        *) echo "usage: $0 [-n QUERIES] [--servers \"authd nsd knot\"]" >&2; exit 2 ;;
    esac
done

need=()
command -v nsd >/dev/null 2>&1 || need+=(nsd)
command -v knotd >/dev/null 2>&1 || need+=(knot)
command -v dig >/dev/null 2>&1 || need+=(dnsutils)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ -n "${BENCH_AUTHD:-}" ]; then
    AUTHD=$BENCH_AUTHD
else
    (cd "$ROOT" && cargo build --release --quiet -p authd --bin authd)
    AUTHD=${CARGO_TARGET_DIR:-$ROOT/target}/release/authd
fi
ZONE=$ROOT/tests/data/root.zone

bench_workdir authd-abuse

start() { # SERVER PORT: starts it, sets PID and NAME
    local s=$1 port=$2 dir=$WORK/$1
    mkdir -p "$dir"
    case $s in
    authd)
        NAME="authd $("$AUTHD" --version | awk '{print $2}') (defaults)"
        taskset -c 1 "$AUTHD" --zone ".=$ZONE" --listen "127.0.0.1:$port" --udp-workers 1 \
            --log-level warn >"$dir/log" 2>&1 &
        ;;
    nsd)
        NAME="NSD $(nsd -v 2>&1 | awk 'NR==1 {print $3}') (defaults)"
        cat >"$dir/nsd.conf" <<EOF
server:
    ip-address: 127.0.0.1
    port: $port
    do-ip6: no
    username: ""
    chroot: ""
    zonesdir: "$dir"
    database: ""
    zonelistfile: "$dir/zone.list"
    xfrdfile: "$dir/xfrd.state"
    xfrdir: "$dir"
    pidfile: "$dir/nsd.pid"
    logfile: "$dir/nsd.log"
    server-count: 1
remote-control:
    control-enable: no
zone:
    name: "."
    zonefile: "$ZONE"
EOF
        taskset -c 1 nsd -d -c "$dir/nsd.conf" >"$dir/log" 2>&1 &
        ;;
    knot)
        NAME="Knot DNS $(knotd -V | awk '{print $NF}') (defaults)"
        cat >"$dir/knot.conf" <<EOF
server:
    rundir: "$dir"
    listen: 127.0.0.1@$port
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: warning
database:
    storage: "$dir"
zone:
  - domain: "."
    file: "$ZONE"
    storage: "$dir"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
EOF
        taskset -c 1 knotd -c "$dir/knot.conf" >"$dir/log" 2>&1 &
        ;;
    *) echo "abuse.sh: unknown server $s" >&2; exit 2 ;;
    esac
    PID=$!
    PIDS+=("$PID")
    for _ in $(seq 200); do
        dig +short +tries=1 +time=1 -p "$port" @127.0.0.1 . SOA >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "abuse.sh: $NAME did not answer; its log:" >&2
    cat "$dir/log" >&2
    exit 1
}

cat >"$WORK/load.py" <<'EOF'
"""The burst from one source and the other client, at once; prints one line
of key=value pairs."""
import socket, struct, sys, threading, time

port, n = int(sys.argv[1]), int(sys.argv[2])
target = ("127.0.0.1", port)

def query(qid, qtype, do):
    q = struct.pack("!HHHHHH", qid, 0, 1, 0, 0, 1) + b"\x00" + struct.pack("!HH", qtype, 1)
    # OPT: root, payload 1232, DO as asked (RFC 6891).
    return q + b"\x00" + struct.pack("!HHIH", 41, 1232, 0x8000 if do else 0, 0)

res = {}

def burst():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.0)
    # Bytes into the server (queries) and out of it (replies).
    sent = got = full = tc = q_bytes = r_bytes = 0
    q = query(0, 48, True)  # . DNSKEY, DO
    start = time.time()
    for i in range(n):
        try:
            s.sendto(q[:0] + struct.pack("!H", i & 0xFFFF) + q[2:], target)
            sent += 1
            q_bytes += len(q)
        except BlockingIOError:
            time.sleep(0.0005)
        while True:
            try:
                r = s.recv(65535)
            except BlockingIOError:
                break
            got += 1
            r_bytes += len(r)
            if r[2] & 0x02:
                tc += 1
            elif struct.unpack("!H", r[6:8])[0] > 0:
                full += 1
    s.settimeout(0.5)
    while True:
        try:
            r = s.recv(65535)
        except socket.timeout:
            break
        got += 1
        r_bytes += len(r)
        if r[2] & 0x02:
            tc += 1
        elif struct.unpack("!H", r[6:8])[0] > 0:
            full += 1
    res["burst"] = dict(sent=sent, replies=got, full=full, tc=tc, bytes_in=q_bytes,
                        bytes_out=r_bytes, seconds=round(time.time() - start, 2))

def other(stop):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.1.0.1", 0))
    s.settimeout(1.0)
    asked = answered = 0
    while not stop.is_set():
        asked += 1
        q = query(asked & 0xFFFF, 6, False)  # . SOA
        s.sendto(q, target)
        ok = False
        try:
            r, _ = s.recvfrom(65535)
            if r[2] & 0x02:
                # Truncated: retry over TCP, as a real client does.
                t = socket.create_connection(target, timeout=1.0)
                t.sendall(struct.pack("!H", len(q)) + q)
                ln = struct.unpack("!H", t.recv(2))[0]
                ok = ln > 12
                t.close()
            else:
                ok = struct.unpack("!H", r[6:8])[0] > 0
        except (socket.timeout, OSError):
            ok = False
        answered += ok
        time.sleep(0.01)
    res["other"] = dict(asked=asked, answered=answered)

stop = threading.Event()
t = threading.Thread(target=other, args=(stop,))
t.start()
time.sleep(0.2)
burst()
time.sleep(1.0)
stop.set()
t.join()
b, o = res["burst"], res["other"]
ratio = b["bytes_out"] / b["bytes_in"] if b["bytes_in"] else 0
share = 100.0 * o["answered"] / o["asked"] if o["asked"] else 0
print(" ".join(f"{k}={v}" for k, v in b.items()),
      f"amplification={ratio:.2f} other_asked={o['asked']} other_answered={o['answered']} other_share={share:.1f}")
EOF

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); nproc: $(nproc); burst: $N '. DNSKEY' queries with DO from 127.0.0.1; other client: '. SOA' from 127.1.0.1 every 10 ms"
echo
echo "| server | burst sent | replies (full / TC) | bytes in | bytes out | out per byte in | burst s | other client answered |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for s in $SERVERS; do
    port=$(free_port)
    start "$s" "$port"
    line=$(taskset -c 0 python3 "$WORK/load.py" "$port" "$N")
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    declare -A v=()
    for kv in $line; do v[${kv%%=*}]=${kv#*=}; done
    echo "| $NAME | ${v[sent]} | ${v[replies]} (${v[full]} / ${v[tc]}) | ${v[bytes_in]} | ${v[bytes_out]} | ${v[amplification]} | ${v[seconds]} | ${v[other_answered]} / ${v[other_asked]} (${v[other_share]}%) |"
    unset v
done
