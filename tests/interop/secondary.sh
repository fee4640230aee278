#!/usr/bin/env bash
# Interop: a real Knot DNS secondary follows a zone served by authd.
#
#   1. authd serves example.org from an sqlite3 DB made with `zone create` and
#      `zone update`, transfers allowed from 127.0.0.1, NOTIFY to Knot;
#   2. Knot (configured as secondary of authd) transfers the zone by AXFR;
#   3. the zone is changed with the sqlite3 shell, journal rows included as
#      docs/ZONE-ADMIN.md says; authd notices the new serial and sends NOTIFY;
#   4. Knot catches up by IXFR (its log must say so), and answers the changed
#      name exactly as authd does (dig both, compare);
#   5. once more with `zone update`;
#   6. once more with a dynamic update (`nsupdate`, RFC 2136).
#
# Everything runs on 127.0.0.1 with unprivileged ports (AUTHD_PORT, KNOT_PORT)
# and a temporary folder; processes are stopped by PID; every wait is bounded
# (tests/interop/common.sh). Installs knot, dnsutils and sqlite3 with apt-get
# when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25300}"
KNOT_PORT="${KNOT_PORT:-25353}"
ZONE=example.org

. tests/interop/common.sh
install_missing knotd=knot dig=dnsutils sqlite3=sqlite3 nsupdate=dnsutils

# 1. The zone and authd.
DB="$TMP/zones.sqlite3"
"$BIN/zone" create --db "$DB" "$ZONE" --ns ns1.example.org. --serial 1
"$BIN/zone" update --db "$DB" "$ZONE" --add "ns1 3600 A 192.0.2.1" --add "www 300 A 192.0.2.1" \
  --add "@ 3600 MX 10 mail" --add "mail 3600 A 192.0.2.25"
cat > "$TMP/authd.toml" <<EOF
listen = ["127.0.0.1:$AUTHD_PORT"]
[[datasource]]
type = "sqlite3"
file = "$DB"
[transfer]
allow = ["127.0.0.1"]
[update]
allow = ["127.0.0.1"]
[notify]
targets = ["127.0.0.1:$KNOT_PORT"]
EOF
start_authd

# 2. Knot as secondary.
knot_conf_head "$KNOT_PORT" > "$TMP/knot.conf"
knot_secondary_of_authd "$ZONE" >> "$TMP/knot.conf"
knotd -c "$TMP/knot.conf" >"$TMP/knotd.out" 2>&1 &
PIDS+=($!)
wait_for 30 "Knot transferred serial 2 by AXFR" has_serial "$KNOT_PORT" "$ZONE" 2
wait_for 10 "Knot logs the AXFR" grep -q "AXFR, incoming.*finished" "$TMP/knot.log"

compare "$KNOT_PORT" www.$ZONE A

# 3. A change with the sqlite3 shell, journaled as docs/ZONE-ADMIN.md says:
#    www A 192.0.2.1 -> 192.0.2.2, serial 2 -> 3.
sqlite3 -bail "$DB" <<'EOF'
BEGIN;
INSERT INTO diffs (zone_id, version, operation, name, rrtype, ttl, rdata)
  SELECT id, 2, 1, 'example.org.', 'SOA', 3600,
         'ns1.example.org. hostmaster.example.org. 2 3600 900 1209600 300'
  FROM zones WHERE name = 'example.org.';
INSERT INTO diffs (zone_id, version, operation, name, rrtype, ttl, rdata)
  SELECT id, 2, 1, 'www.example.org.', 'A', 300, '192.0.2.1'
  FROM zones WHERE name = 'example.org.';
INSERT INTO diffs (zone_id, version, operation, name, rrtype, ttl, rdata)
  SELECT id, 3, 0, 'example.org.', 'SOA', 3600,
         'ns1.example.org. hostmaster.example.org. 3 3600 900 1209600 300'
  FROM zones WHERE name = 'example.org.';
INSERT INTO diffs (zone_id, version, operation, name, rrtype, ttl, rdata)
  SELECT id, 3, 0, 'www.example.org.', 'A', 300, '192.0.2.2'
  FROM zones WHERE name = 'example.org.';
UPDATE records SET rdata = '192.0.2.2'
  WHERE name = 'www.example.org.' AND rdtype = 'A'
    AND zone_id = (SELECT id FROM zones WHERE name = 'example.org.');
UPDATE records SET rdata = 'ns1.example.org. hostmaster.example.org. 3 3600 900 1209600 300'
  WHERE rdtype = 'SOA' AND zone_id = (SELECT id FROM zones WHERE name = 'example.org.');
COMMIT;
EOF
wait_for 5 "authd serves serial 3" has_serial "$AUTHD_PORT" "$ZONE" 3
wait_for 10 "authd sends NOTIFY" grep -q "NOTIFY of $ZONE. serial 3 to 127.0.0.1:$KNOT_PORT: answered" "$TMP/authd.log"
# 4. Knot catches up by IXFR (its SOA refresh is an hour away: only NOTIFY explains it).
wait_for 20 "Knot has serial 3" has_serial "$KNOT_PORT" "$ZONE" 3
wait_for 10 "Knot logs an IXFR" grep -q "IXFR, incoming.*finished" "$TMP/knot.log"
compare "$KNOT_PORT" www.$ZONE A

# 5. Once more with `zone update`: delete mail, add ftp (serial 3 -> 4).
"$BIN/zone" update --db "$DB" "$ZONE" --delete "mail A 192.0.2.25" --delete "@ MX 10 mail" \
  --add "ftp 600 AAAA 2001:db8::21"
wait_for 20 "Knot has serial 4" has_serial "$KNOT_PORT" "$ZONE" 4
wait_for 10 "Knot logs a second IXFR" test "$(grep -c "IXFR, incoming.*finished" "$TMP/knot.log")" -ge 2
compare "$KNOT_PORT" ftp.$ZONE AAAA
compare "$KNOT_PORT" $ZONE SOA
[ -z "$(dig +short +norec @127.0.0.1 -p "$KNOT_PORT" mail.$ZONE A)" ] || fail "Knot still has mail.$ZONE"

# 6. A dynamic update: add an ACME-style TXT, replace www (serial 4 -> 5).
nsupdate <<EOF
server 127.0.0.1 $AUTHD_PORT
zone $ZONE.
update add _acme-challenge.$ZONE. 60 TXT "token-1"
update delete www.$ZONE. A
update add www.$ZONE. 300 A 192.0.2.3
send
EOF
wait_for 5 "authd serves serial 5" has_serial "$AUTHD_PORT" "$ZONE" 5
wait_for 20 "Knot has serial 5" has_serial "$KNOT_PORT" "$ZONE" 5
wait_for 10 "Knot logs a third IXFR" test "$(grep -c "IXFR, incoming.*finished" "$TMP/knot.log")" -ge 3
compare "$KNOT_PORT" www.$ZONE A
compare "$KNOT_PORT" _acme-challenge.$ZONE TXT

echo "--- Knot log (transfers)"
grep -E "AXFR|IXFR|notify" "$TMP/knot.log"
echo "--- authd log (transfers and NOTIFY)"
grep -E "xfr|notify" "$TMP/authd.log"
echo "OK: Knot followed authd by AXFR, then IXFR after NOTIFY (SQL, zone update, UPDATE)"
