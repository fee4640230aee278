#!/usr/bin/env bash
# Interop: IXFR from differences (issue 27). authd is primary of two zones,
# with Knot DNS and BIND 9 as its secondaries:
#   example.org  in sqlite3, replaced whole by `loadzone` (as an operator
#                regenerating a zone does): loadzone computes the difference
#                from the stored version and journals it;
#   example.net  from a master file served from memory, edited and reloaded
#                (SIGHUP): the reload keeps the difference in memory.
#   1. both secondaries transfer both zones (AXFR, serial 1);
#   2. loadzone with serial 2 and SIGHUP with serial 2: authd NOTIFYs, each
#      secondary asks IXFR and gets the difference (authd's log says
#      "serial 1 -> 2, N journal RRs" for each; Knot logs an incoming IXFR),
#      and answers as authd does;
#   3. once more (serial 3): IXFR again, from 2.
#
# Everything runs on 127.0.0.1 with unprivileged ports (AUTHD_PORT, KNOT_PORT,
# NAMED_PORT) and a temporary folder; processes are stopped by PID; every
# wait is bounded (tests/interop/common.sh). Installs knot, bind9 and
# dnsutils with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25340}"
KNOT_PORT="${KNOT_PORT:-25393}"
NAMED_PORT="${NAMED_PORT:-25394}"

. tests/interop/common.sh
install_missing knotd=knot named=bind9 dig=dnsutils
NAMED="$(command -v named)"

# version SERIAL WWW: a zone file of either zone (relative names).
version() {
  cat <<EOF
\$TTL 300
@ SOA ns1 hostmaster $1 3600 900 1209600 60
@ NS ns1
ns1 A 192.0.2.1
www A $2
mail MX 10 ns1
v$1 TXT "added in version $1"
EOF
}

DB="$TMP/zones.sqlite3"
version 1 192.0.2.10 > "$TMP/org.zone"
"$BIN/loadzone" --db "$DB" example.org. "$TMP/org.zone" > "$TMP/loadzone.out"
version 1 192.0.2.10 > "$TMP/net.zone"
cat > "$TMP/authd.toml" <<EOF
listen = ["127.0.0.1:$AUTHD_PORT"]
[[datasource]]
type = "sqlite3"
file = "$DB"
[[datasource]]
type = "memory"
zones = [{ origin = "example.net.", file = "$TMP/net.zone" }]
[transfer]
allow = ["127.0.0.1"]
[notify]
targets = ["127.0.0.1:$KNOT_PORT", "127.0.0.1:$NAMED_PORT"]
EOF
start_authd
AUTHD_PID="${PIDS[-1]}"

knot_conf_head "$KNOT_PORT" > "$TMP/knot.conf"
knot_secondary_of_authd example.org example.net >> "$TMP/knot.conf"
knotd -c "$TMP/knot.conf" >"$TMP/knotd.out" 2>&1 &
PIDS+=($!)

named_conf_head "$NAMED_PORT" xfer-in > "$TMP/named.conf"
for zone in example.org example.net; do
  cat >> "$TMP/named.conf" <<EOF
zone "$zone" {
    type secondary;
    file "$zone.db";
    primaries { 127.0.0.1 port $AUTHD_PORT; };
    allow-notify { 127.0.0.1; };
};
EOF
done
"$NAMED" -f -n 1 -c "$TMP/named.conf" >"$TMP/named.out" 2>&1 &
PIDS+=($!)

# 1. AXFR of both zones by both.
for port in "$KNOT_PORT" "$NAMED_PORT"; do
  for zone in example.org example.net; do
    wait_for 30 "the secondary on $port has $zone serial 1" has_serial "$port" "$zone" 1
  done
done
# authd's NOTIFY poller learns the serials on its first look: let it look.
sleep 2

# step SERIAL WWW: the next version of both zones, by loadzone and SIGHUP;
# both secondaries follow each zone by IXFR from the previous serial.
step() {
  local serial="$1" www="$2" prev=$(($1 - 1)) port zone
  version "$serial" "$www" > "$TMP/org.zone"
  "$BIN/loadzone" --db "$DB" example.org. "$TMP/org.zone" >> "$TMP/loadzone.out"
  grep -q "journaled the difference from serial $prev to $serial" "$TMP/loadzone.out" ||
    fail "loadzone did not journal the difference $prev -> $serial"
  version "$serial" "$www" > "$TMP/net.zone"
  kill -HUP "$AUTHD_PID"
  wait_for 10 "authd kept example.net's difference $prev -> $serial" \
    grep -q "zone example.net.: serial $prev -> $serial: 2 RRs deleted, 2 added, kept for IXFR" "$TMP/authd.log"
  for port in "$KNOT_PORT" "$NAMED_PORT"; do
    for zone in example.org example.net; do
      wait_for 20 "the secondary on $port has $zone serial $serial" has_serial "$port" "$zone" "$serial"
      compare "$port" "www.$zone" A
      compare "$port" "v$serial.$zone" TXT
    done
  done
  for zone in example.org example.net; do
    wait_for 10 "authd served both secondaries IXFR of $zone $prev -> $serial" test \
      "$(grep -c "IXFR of $zone. for 127.0.0.1: serial $prev -> $serial, 6 journal RRs" "$TMP/authd.log")" -ge 2
    [ -n "$(dig +short +norec @127.0.0.1 -p "$KNOT_PORT" "v$prev.$zone" TXT)" ] &&
      fail "Knot still has v$prev.$zone: the deletions were not applied"
  done
  wait_for 10 "Knot logs IXFR of both zones" test \
    "$(grep -c "IXFR, incoming.*finished" "$TMP/knot.log")" -ge $((2 * prev))
}
# Each version: www's address changes, one TXT is added and the previous one
# deleted: 2 RRs each way, 6 journal RRs with the SOAs.
step 2 192.0.2.20
step 3 192.0.2.30

echo "--- authd log (transfers out, NOTIFY)"
grep -E "IXFR|AXFR|NOTIFY|kept for IXFR" "$TMP/authd.log" | head -30
echo "--- Knot log (transfers)"
grep -E "AXFR|IXFR" "$TMP/knot.log"
echo "--- named log (transfers)"
grep -E "transfer|IXFR" "$TMP/named.log" | head -20
echo "--- loadzone"
cat "$TMP/loadzone.out"
echo "OK: Knot DNS and BIND 9 follow authd by IXFR of differences from loadzone (sqlite3) and from SIGHUP (memory)"
