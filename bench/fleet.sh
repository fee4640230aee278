#!/usr/bin/env bash
# Fleet: from one UPDATE at the primary to four secondaries serving it.
# docs/PERFORMANCE.md, "Fleet: UPDATE to four secondaries".
#
# One authd primary (release build) keeps m1, m2, m3.example. in an sqlite3
# DB and a catalog of them (`[[catalog]]`), serves zone transfers over TLS
# (`[tls]`, a certificate for ns1.example.net from a private CA made here by
# openssl) and over plain TCP, takes unsigned UPDATE from 127.0.0.1
# (`[update] allow`), and NOTIFYs four secondaries, each of which learns the
# members from the catalog alone and follows them by IXFR:
#
#   authd-1, authd-2  `[[secondary]] catalog = true`, primaries
#                     "127.0.0.1:TLS tls ns1.example.net" (strict TLS);
#   bind              BIND 9.18 `catalog-zones`, default-primaries over TLS
#                     (`tls` with ca-file and remote-hostname: strict);
#   knot              Knot DNS 3.2 `catalog-role: interpret` over plain TCP
#                     (Knot 3.2 has no XoT as a client).
#
# Then ROUNDS times (default 20), FLEET_PAUSE (default 1.0) + 0-300 ms
# apart: nsupdate replaces www.m1.example. A, and from nsupdate's return
# bench/fleet_poll.py asks each secondary about every 2 ms until it answers
# the new address (bounded, 10 s). Prints each round and per-secondary and
# all-four median, min and max, and the primary's commit-to-NOTIFY delay.
#
# usage: bench/fleet.sh [ROUNDS]
#   FLEET_PAUSE=S   seconds between UPDATEs before the random 0-300 ms (0:
#                   back to back, where Knot and BIND add 250-750 ms stalls)
#   FLEET_LOGS=DIR  every log and configuration copied to DIR at the end
# authd is $BENCH_AUTHD or the release build in $CARGO_TARGET_DIR (default
# target/), zone the same folder's `zone`. Needs named, knotd, nsupdate, dig,
# openssl and python3 with dnspython. Everything on 127.0.0.1, ports picked
# free, files in a temp folder; processes stopped by PID on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
AUTHD=${BENCH_AUTHD:-$TARGET/release/authd}
ZONE=$(dirname "$AUTHD")/zone
ROUNDS=${1:-20}
CATZ=catalog.example.
MEMBERS="m1.example. m2.example. m3.example."
. "$ROOT/bench/lib.sh"

for tool in named knotd nsupdate dig openssl; do
    command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done
PY=python3
$PY -c 'import dns.query' 2>/dev/null || PY=/usr/bin/python3
$PY -c 'import dns.query' || { echo "needs python3 with dnspython (python3-dnspython)" >&2; exit 2; }
[ -x "$AUTHD" ] && [ -x "$ZONE" ] || { echo "no $AUTHD or $ZONE: cargo build --release -p authd" >&2; exit 2; }

bench_workdir fleet
P_PORT=$(free_port)
P_TLS=$(free_port)
A1_PORT=$(free_port)
A2_PORT=$(free_port)
BIND_PORT=$(free_port)
KNOT_PORT=$(free_port)

fail() {
    echo "FAIL: $*" >&2
    local log
    for log in "$WORK"/*.log; do echo "--- $log" >&2; tail -30 "$log" >&2; done
    exit 1
}
[ -z "${FLEET_LOGS:-}" ] || trap 'mkdir -p "$FLEET_LOGS"; cp "$WORK"/*.log "$WORK"/*.conf "$WORK"/*.toml "$FLEET_LOGS"/ 2>/dev/null; bench_cleanup' EXIT
wait_for() { # SECONDS DESCRIPTION COMMAND...
    local deadline=$((SECONDS + $1)) what=$2
    shift 2
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -ge "$deadline" ] && fail "$what (waited)"
        sleep 0.2
    done
}
serial_at() { dig +short +norec +time=1 +tries=1 @127.0.0.1 -p "$1" "$2" SOA | awk '{print $3}'; }
same_serial() { # PORT ZONE: PORT has the primary's serial of ZONE
    local s
    s=$(serial_at "$P_PORT" "$2")
    [ -n "$s" ] && [ "$(serial_at "$1" "$2")" = "$s" ]
}

# The certificates (as tests/interop/xot.sh).
PKI=$WORK/pki
mkdir -p "$PKI"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout "$PKI/ca.key" -out "$PKI/ca.pem" -subj "/CN=authd fleet bench CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$PKI/server.key" -out "$PKI/server.csr" -subj "/CN=ns1.example.net" 2>/dev/null
printf 'subjectAltName=DNS:ns1.example.net\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' \
    > "$PKI/server.ext"
openssl x509 -req -in "$PKI/server.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 2 -extfile "$PKI/server.ext" -out "$PKI/server.crt" 2>/dev/null
chmod 0644 "$PKI"/*

# The primary.
DB=$WORK/zones.sqlite3
for z in $MEMBERS; do
    "$ZONE" create --db "$DB" "$z" --ns "ns1.$z" --serial 1 >/dev/null
    "$ZONE" update --db "$DB" "$z" --add "ns1 300 A 192.0.2.1" --add "www 300 A 192.0.2.80" >/dev/null
done
cat > "$WORK/primary.toml" <<EOF
listen = ["127.0.0.1:$P_PORT"]
[[datasource]]
type = "sqlite3"
file = "$DB"
[[catalog]]
origin = "$CATZ"
file = "$DB"
[tls]
certificate = "$PKI/server.crt"
key = "$PKI/server.key"
listen = ["127.0.0.1:$P_TLS"]
[transfer]
allow = ["127.0.0.1"]   # TLS for authd and BIND, plain TCP for Knot 3.2
[update]
allow = ["127.0.0.1"]
[notify]
targets = ["127.0.0.1:$A1_PORT", "127.0.0.1:$A2_PORT", "127.0.0.1:$BIND_PORT", "127.0.0.1:$KNOT_PORT"]
[rrl]
enabled = false
EOF
"$AUTHD" --config "$WORK/primary.toml" > "$WORK/primary.log" 2>&1 &
PIDS+=($!)
wait_for 20 "the primary listening on TLS" grep -q "listening on 127.0.0.1:$P_TLS (TLS" "$WORK/primary.log"

# authd secondaries: the catalog and its members over strict TLS.
for n in 1 2; do
    port_var=A${n}_PORT
    cat > "$WORK/authd-$n.toml" <<EOF
listen = ["127.0.0.1:${!port_var}"]
[tls]
ca = "$PKI/ca.pem"
[[secondary]]
zone = "$CATZ"
catalog = true
primaries = ["127.0.0.1:$P_TLS tls ns1.example.net"]
file = "$WORK/authd-$n.sqlite3"
min_refresh = 1
[rrl]
enabled = false
EOF
    "$AUTHD" --config "$WORK/authd-$n.toml" > "$WORK/authd-$n.log" 2>&1 &
    PIDS+=($!)
done

# BIND 9.18: catalog-zones, the catalog and members over strict TLS.
mkdir -p "$WORK/named/catz"
cat > "$WORK/named.conf" <<EOF
tls primary-strict { ca-file "$PKI/ca.pem"; remote-hostname "ns1.example.net"; };
options {
    directory "$WORK/named";
    pid-file "$WORK/named/named.pid";
    session-keyfile "$WORK/named/session.key";
    managed-keys-directory "$WORK/named";
    listen-on port $BIND_PORT { 127.0.0.1; };
    listen-on-v6 { none; };
    recursion no;
    notify no;
    dnssec-validation no;
    allow-new-zones yes;
    catalog-zones {
        zone "$CATZ" default-primaries { 127.0.0.1 port $P_TLS tls primary-strict; }
            zone-directory "$WORK/named/catz" min-update-interval 1;
    };
};
controls { };
logging {
    channel to_file { file "$WORK/named.log"; severity info; print-category yes; };
    category default { to_file; };
};
zone "$CATZ" {
    type secondary;
    file "catalog.db";
    primaries { 127.0.0.1 port $P_TLS tls primary-strict; };
};
EOF
named -f -n 1 -c "$WORK/named.conf" > "$WORK/named.out" 2>&1 &
PIDS+=($!)

# Knot DNS 3.2: the catalog interpreted, plain TCP.
mkdir -p "$WORK/knot/run" "$WORK/knot/db" "$WORK/knot/zones"
cat > "$WORK/knot.conf" <<EOF
server:
    rundir: "$WORK/knot/run"
    listen: 127.0.0.1@$KNOT_PORT
log:
  - target: "$WORK/knot.log"
    any: info
database:
    storage: "$WORK/knot/db"
remote:
  - id: primary
    address: 127.0.0.1@$P_PORT
acl:
  - id: notify_from_primary
    address: 127.0.0.1
    action: notify
template:
  - id: default
    storage: "$WORK/knot/zones"
    zonefile-sync: -1
    zonefile-load: none
    journal-content: all
  - id: member
    storage: "$WORK/knot/zones"
    zonefile-sync: -1
    zonefile-load: none
    journal-content: all
    master: primary
    acl: notify_from_primary
zone:
  - domain: $CATZ
    master: primary
    acl: notify_from_primary
    catalog-role: interpret
    catalog-template: member
EOF
knotd -c "$WORK/knot.conf" > "$WORK/knotd.out" 2>&1 &
PIDS+=($!)

SECONDARIES="authd-1=$A1_PORT authd-2=$A2_PORT bind=$BIND_PORT knot=$KNOT_PORT"
# (Knot answers no query for a catalog zone it interprets: members only.)
for pair in $SECONDARIES; do
    zones="$CATZ $MEMBERS"
    [ "${pair%=*}" = knot ] && zones=$MEMBERS
    for z in $zones; do
        wait_for 60 "${pair%=*} has $z" same_serial "${pair#*=}" "$z"
    done
done
for n in 1 2; do
    grep -q "m1.example.: AXFR from 127.0.0.1:$P_TLS tls ns1.example.net" "$WORK/authd-$n.log" ||
        fail "authd-$n did not transfer m1.example. over TLS"
done
grep -q "transfer of 'm1.example/IN' from 127.0.0.1#$P_TLS" "$WORK/named.log" ||
    fail "named did not transfer m1.example over TLS"
echo "fleet ready: primary 127.0.0.1:$P_PORT (TLS $P_TLS); $SECONDARIES; members: $MEMBERS"

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); nproc: $(nproc); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
echo "authd $(cd "$ROOT" && git rev-parse --short HEAD); $(named -v); $(knotd -V)"
FLEET_ROUNDS_FILE=$WORK/rounds.txt $PY "$ROOT/bench/fleet_poll.py" "$P_PORT" www.m1.example. "$ROUNDS" 10 $SECONDARIES ||
    fail "the timing loop failed"
# Where the time goes: from each UPDATE's commit (the primary's log line) to
# the NOTIFY for that serial (the primary's poll, POLL_INTERVAL in
# auth/src/notify.rs), from the log's timestamps; then, for each secondary,
# from that NOTIFY's log line to the poll that saw the new address (the same
# clock; the poll's 2 ms step and a log line written after the sends make it
# a few ms uncertain). Round R set
# serial 2 + R (the members start at serial 2).
$PY - "$WORK/primary.log" "$WORK/rounds.txt" <<'PY'
import re, statistics, sys
from datetime import datetime
t = lambda line: datetime.strptime(line[:26], "%Y-%m-%dT%H:%M:%S.%f").timestamp()
upd, note = {}, {}
for line in open(sys.argv[1]):
    m = re.search(r"UPDATE of m1\.example\. .*serial (\d+) -> (\d+)", line)
    if m: upd[int(m.group(2))] = t(line)
    m = re.search(r"zone m1\.example\. serial (\d+) -> (\d+): notifying", line)
    if m: note[int(m.group(2))] = t(line)
delay = {s: (note[s] - upd[s]) * 1000 for s in upd if s in note}
fmt = lambda v: f"median {statistics.median(v):6.1f}, min {min(v):6.1f}, max {max(v):6.1f} ms"
if delay:
    print(f"primary   UPDATE commit -> NOTIFY sent: {fmt(list(delay.values()))} ({len(delay)} UPDATEs)")
after = {}
for line in open(sys.argv[2]):
    r, label, ms, at = line.split()
    if int(r) + 2 in note:
        after.setdefault(label, []).append((float(at) - note[int(r) + 2]) * 1000)
for label, v in after.items():
    print(f"{label:<9} NOTIFY sent -> serving the new A:  {fmt(v)}")
PY
# The transfers after the UPDATEs were IXFRs (as logged: the log limiter may
# leave some lines out).
echo "primary: IXFRs of m1.example. logged: $(grep -c "IXFR of m1.example. for" "$WORK/primary.log") ($ROUNDS UPDATEs x 4 secondaries)"
