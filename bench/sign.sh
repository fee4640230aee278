#!/usr/bin/env bash
# Signing a TLD-like zone whole, in one run: authd's first signing of an
# unsigned zone in its sqlite3 DB (the signer of a running authd, policy
# `[[signing.zone]]` with nsec3_opt_out = true: CSK ECDSA P-256, NSEC3 opt-out,
# 0 iterations, no salt), against `dnssec-signzone -n 2` (BIND 9: the same
# key type and NSEC3 settings, -3 - -A -H 0) and `kzonesign` (Knot DNS: the
# same policy, signing-threads: 2). Prints wall time and peak RSS of each.
# docs/PERFORMANCE.md, "Online signing".
#
# usage: bench/sign.sh [-d DELEGATIONS]   (default 1000000)
#
# The zone is bench/make_tld.py's (every tenth delegation has a DS). authd
# and loadzone are the release builds in $CARGO_TARGET_DIR (default target/),
# or $BENCH_AUTHD / $BENCH_LOADZONE. authd's time runs from its start to the
# log line of the signed commit (it reads the zone from the DB, signs, writes
# the signatures and NSEC3 records and journals them); the others read and
# write master files. Work files are in a temp folder (removed on exit).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
AUTHD=${BENCH_AUTHD:-$TARGET/release/authd}
LOADZONE=${BENCH_LOADZONE:-$TARGET/release/loadzone}
N=1000000
while getopts d: opt; do
    case $opt in
    d) N=$OPTARG ;;
    *) exit 2 ;;
    esac
done
for tool in dnssec-keygen dnssec-signzone kzonesign python3; do
    command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install bind9-utils knot python3)" >&2; exit 2; }
done
for bin in "$AUTHD" "$LOADZONE"; do
    [ -x "$bin" ] || { echo "missing $bin: cargo build --release" >&2; exit 2; }
done

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_workdir authd-sign

python3 "$ROOT/bench/make_tld.py" --delegations "$N" --queries 10 "$WORK/tld" >/dev/null
ZONE=$WORK/tld/zone
echo "zone: $N delegations, $(grep -c . "$ZONE") lines"

# authd: load unsigned (not timed), then the signer's first signing.
"$LOADZONE" --db "$WORK/tld.sqlite3" tld. "$ZONE" >/dev/null
port=$(free_port)
cat >"$WORK/authd.toml" <<CONF
listen = ["127.0.0.1:$port"]
[[datasource]]
type = "sqlite3"
file = "$WORK/tld.sqlite3"
[signing]
nsec3_opt_out = true
[[signing.zone]]
origin = "tld."
CONF
t0=$(date +%s.%N)
"$AUTHD" --config "$WORK/authd.toml" >"$WORK/authd.log" 2>&1 &
pid=$!
PIDS+=("$pid")
hwm=0
until grep -q "signing tld.: serial" "$WORK/authd.log"; do
    kill -0 "$pid" 2>/dev/null || { cat "$WORK/authd.log" >&2; exit 1; }
    h=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    [ "${h:-0}" -gt "$hwm" ] && hwm=$h
    sleep 0.2
done
t1=$(date +%s.%N)
h=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
[ "$h" -gt "$hwm" ] && hwm=$h
kill "$pid"
wait "$pid" 2>/dev/null || true
printf 'authd (first signing in the server): %.1f s, peak RSS %d MiB\n' "$(echo "$t1 - $t0" | bc -l)" $((hwm / 1024))
grep "signing tld.: serial" "$WORK/authd.log" | sed 's/^.*signing tld.: /  authd: /'

# BIND: dnssec-signzone with a CSK, two threads.
mkdir -p "$WORK/bind" && cd "$WORK/bind"
dnssec-keygen -q -a ECDSAP256SHA256 -f KSK -n ZONE tld. >/dev/null
cp "$ZONE" zone
/usr/bin/time -f '%e %M' -o time dnssec-signzone -q -n 2 -3 - -A -H 0 -z -S -K . -o tld. -f zone.signed zone >/dev/null
read -r s kib <time
printf 'BIND dnssec-signzone -n 2: %.1f s, peak RSS %d MiB\n' "$s" $((kib / 1024))

# Knot: kzonesign, keys made first on a tiny zone (not timed).
mkdir -p "$WORK/knot/out" && cd "$WORK/knot"
cat >knot.conf <<CONF
database:
    storage: $WORK/knot
template:
  - id: default
    storage: $WORK/knot
policy:
  - id: p
    algorithm: ecdsap256sha256
    single-type-signing: on
    nsec3: on
    nsec3-opt-out: on
    nsec3-iterations: 0
    nsec3-salt-length: 0
    signing-threads: 2
zone:
  - domain: tld.
    file: $WORK/knot/tld.zone
    dnssec-signing: on
    dnssec-policy: p
CONF
printf '$ORIGIN tld.\n$TTL 300\n@ SOA a hm 1 2 3 4 5\n@ NS a\na A 192.0.2.1\n' >tld.zone
kzonesign -c knot.conf -o out tld. >/dev/null 2>&1 || true
rm -f out/*
cp "$ZONE" tld.zone
/usr/bin/time -f '%e %M' -o time kzonesign -c knot.conf -o out tld. >/dev/null 2>&1
read -r s kib <time
printf 'Knot kzonesign (2 threads): %.1f s, peak RSS %d MiB\n' "$s" $((kib / 1024))
