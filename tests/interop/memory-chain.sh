#!/usr/bin/env bash
# Interop: the chain Knot DNS -> authd -> Knot DNS by IXFR, authd's zone
# served from memory (`[[secondary]] memory = true`) and kept in its DB.
#
#   1. Knot A is primary of example.org (NOTIFY to authd); authd follows it
#      into memory (AXFR first), and NOTIFYs Knot B, its own secondary;
#   2. Knot B transfers the zone from authd (AXFR) and answers as Knot A;
#   3. a change on Knot A (knotc zone transaction): authd catches up by
#      incremental IXFR (its log says so), rebuilds the zone in memory, and
#      Knot B follows authd by IXFR from authd's journal (its log says so);
#   4. Knot A stopped, authd restarted: it serves the zone from its DB at
#      once (from memory again), without a transfer.
#
# Everything runs on 127.0.0.1 with unprivileged ports (AUTHD_PORT, KNOT_PORT,
# KNOT_B_PORT) and a temporary folder; processes are stopped by PID; every
# wait is bounded (tests/interop/common.sh). Installs knot and dnsutils with
# apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25330}"
KNOT_PORT="${KNOT_PORT:-25383}"
KNOT_B_PORT="${KNOT_B_PORT:-25384}"
ZONE=example.org

. tests/interop/common.sh
install_missing knotd=knot dig=dnsutils

# 1. Knot A, the primary.
cat > "$TMP/$ZONE.zone" <<EOF
\$ORIGIN $ZONE.
\$TTL 300
@ SOA ns1 hostmaster 1 3600 900 1209600 60
@ NS ns1
ns1 A 192.0.2.1
www A 192.0.2.1
mail MX 10 ns1
EOF
knot_conf_head "$KNOT_PORT" > "$TMP/knot.conf"
cat >> "$TMP/knot.conf" <<EOF
remote:
  - id: authd
    address: 127.0.0.1@$AUTHD_PORT
acl:
  - id: transfer_to_authd
    address: 127.0.0.1
    action: transfer
zone:
  - domain: $ZONE
    file: "$TMP/$ZONE.zone"
    zonefile-load: whole
    journal-content: changes
    notify: authd
    acl: transfer_to_authd
EOF
start_knot_a() {
  knotd -c "$TMP/knot.conf" >>"$TMP/knotd.out" 2>&1 &
  KNOT_PID=$!
  PIDS+=($KNOT_PID)
  wait_for 20 "Knot A serves $ZONE" has_serial "$KNOT_PORT" "$ZONE" "$1"
}
start_knot_a 1

# authd, secondary of Knot A from memory, primary of Knot B.
cat > "$TMP/authd.toml" <<EOF
listen = ["127.0.0.1:$AUTHD_PORT"]
[[secondary]]
zone = "$ZONE."
primaries = ["127.0.0.1:$KNOT_PORT"]
file = "$TMP/secondary.sqlite3"
memory = true
min_refresh = 1
[transfer]
allow = ["127.0.0.1"]
[notify]
targets = ["127.0.0.1:$KNOT_B_PORT"]
EOF
start_authd
wait_for 20 "authd has $ZONE serial 1" has_serial "$AUTHD_PORT" "$ZONE" 1
grep -q "serving 0 zones from memory:" "$TMP/authd.log" || fail "authd did not serve the zone from memory"
grep -q "$ZONE.: AXFR from 127.0.0.1:$KNOT_PORT" "$TMP/authd.log" || fail "authd did not log the AXFR"

# 2. Knot B, secondary of authd (its own folders).
sed -e "s|$TMP/knot/|$TMP/knot-b/|g; s|$TMP/knot.log|$TMP/knot-b.log|; s|@$KNOT_PORT|@$KNOT_B_PORT|" \
  <(knot_conf_head "$KNOT_B_PORT") > "$TMP/knot-b.conf"
mkdir -p "$TMP/knot-b/run" "$TMP/knot-b/db" "$TMP/knot-b/zones"
knot_secondary_of_authd "$ZONE" >> "$TMP/knot-b.conf"
knotd -c "$TMP/knot-b.conf" >"$TMP/knotd-b.out" 2>&1 &
PIDS+=($!)
wait_for 30 "Knot B transferred serial 1 from authd" has_serial "$KNOT_B_PORT" "$ZONE" 1
wait_for 10 "Knot B logs the AXFR" grep -q "AXFR, incoming.*finished" "$TMP/knot-b.log"
compare "$KNOT_PORT" www.$ZONE A
compare "$KNOT_B_PORT" mail.$ZONE MX

# 3. A change on Knot A: authd by IXFR, then Knot B by IXFR from authd.
# authd's NOTIFY poller learns the serials on its first look: let it look.
sleep 2
knotc -c "$TMP/knot.conf" zone-begin $ZONE >/dev/null
knotc -c "$TMP/knot.conf" zone-unset $ZONE www A 192.0.2.1 >/dev/null
knotc -c "$TMP/knot.conf" zone-set $ZONE www 300 A 192.0.2.2 >/dev/null
knotc -c "$TMP/knot.conf" zone-commit $ZONE >/dev/null
wait_for 20 "authd has $ZONE serial 2" has_serial "$AUTHD_PORT" "$ZONE" 2
grep -q "$ZONE.: IXFR from 127.0.0.1:$KNOT_PORT: serial 1 -> 2, 1 difference" "$TMP/authd.log" ||
  fail "authd did not catch up with Knot A by incremental IXFR"
compare "$KNOT_PORT" www.$ZONE A
wait_for 20 "Knot B has serial 2" has_serial "$KNOT_B_PORT" "$ZONE" 2
wait_for 10 "Knot B logs an IXFR" grep -q "IXFR, incoming.*finished" "$TMP/knot-b.log"
wait_for 10 "authd served Knot B IXFR 1 -> 2" grep -q "IXFR of $ZONE. for 127.0.0.1: serial 1 -> 2" "$TMP/authd.log"
compare "$KNOT_B_PORT" www.$ZONE A
compare "$KNOT_B_PORT" $ZONE SOA

# 4. Knot A stopped, authd restarted: served from its DB (in memory) at once.
kill "$KNOT_PID"
wait "$KNOT_PID" 2>/dev/null || true
for i in "${!PIDS[@]}"; do
  if grep -q "authd" "/proc/${PIDS[i]}/cmdline" 2>/dev/null; then
    kill "${PIDS[i]}"; wait "${PIDS[i]}" 2>/dev/null || true
  fi
done
start_authd
wait_for 10 "authd serves serial 2 from its DB" has_serial "$AUTHD_PORT" "$ZONE" 2
grep -q "serving 1 zone from memory:" "$TMP/authd.log" || fail "authd did not serve the zone from memory after the restart"
compare "$KNOT_B_PORT" www.$ZONE A

echo "--- authd log (secondary, transfers, NOTIFY)"
grep -E "secondary zone|xfr|IXFR|AXFR|NOTIFY" "$TMP/authd.log" | head -30
echo "--- Knot B log (transfers)"
grep -E "AXFR|IXFR" "$TMP/knot-b.log"
echo "OK: Knot A -> authd (from memory) -> Knot B by IXFR; authd served the zone from its DB after a restart without its primary"
