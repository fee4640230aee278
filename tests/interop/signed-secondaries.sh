#!/usr/bin/env bash
# Interop: Knot DNS and BIND 9 secondaries follow a zone authd signs online.
#
#   1. authd serves example.org from an sqlite3 DB with [[signing.zone]]: its
#      signer makes a CSK and signs the zone (serial 2 -> 3), NOTIFY to both;
#   2. Knot and named transfer it (AXFR), and each copy, transferred out of
#      them again with dig, passes dnssec-verify and ldns-verify-zone;
#   3. the zone is changed by a dynamic update (nsupdate), by the sqlite3
#      shell (plain SQL, signed by authd's signer), by `zone update`, and by a
#      CSK rollover (`authc dnssec rollover`: the new key signs beside the
#      old; `authc dnssec ds-published`: the old one is retired); after each,
#      both secondaries catch up by IXFR (their logs say so) and their copies
#      verify again.
#
# Everything runs on 127.0.0.1 with unprivileged ports and a temporary folder;
# processes are stopped by PID; every wait is bounded (tests/interop/common.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25400}"
KNOT_PORT="${KNOT_PORT:-25453}"
NAMED_PORT="${NAMED_PORT:-25454}"
ZONE=example.org

. tests/interop/common.sh
install_missing knotd=knot named=bind9 dig=dnsutils sqlite3=sqlite3 nsupdate=dnsutils \
  dnssec-verify=bind9-utils ldns-verify-zone=ldnsutils
NAMED="$(command -v named)"

# verify_copy PORT STEP: an AXFR from the server on PORT passes both validators.
verify_copy() {
  local file="$TMP/$2-$1.zone"
  dig +onesoa +nocmd +nostats +nocomments @127.0.0.1 -p "$1" "$ZONE." AXFR > "$file"
  grep -q RRSIG "$file" || fail "$2: the copy on port $1 is not signed"
  dnssec-verify -q -z -o "$ZONE." "$file" || fail "$2: dnssec-verify fails on the copy on port $1"
  ldns-verify-zone "$file" >/dev/null || fail "$2: ldns-verify-zone fails on the copy on port $1"
  echo "$2: the copy on port $1 verifies ($(grep -c RRSIG "$file") RRSIGs)"
}

# 1. The zone and authd, signing it.
DB="$TMP/zones.sqlite3"
"$BIN/zone" create --db "$DB" "$ZONE" --ns ns1.example.org. --serial 1
"$BIN/zone" update --db "$DB" "$ZONE" --add "ns1 3600 A 192.0.2.1" --add "www 300 A 192.0.2.1" \
  --add "@ 3600 MX 10 mail" --add "mail 3600 A 192.0.2.25" --add "*.wild 300 TXT wildcard"
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
targets = ["127.0.0.1:$KNOT_PORT", "127.0.0.1:$NAMED_PORT"]
[control]
socket = "$TMP/control.sock"
[signing]
dnskey_ttl = 1
propagation_delay = 1
[[signing.zone]]
origin = "$ZONE."
EOF
start_authd
wait_for 20 "authd signs the zone (serial 3)" has_serial "$AUTHD_PORT" "$ZONE" 3
verify_copy "$AUTHD_PORT" first

# 2. Knot and named as secondaries.
knot_conf_head "$KNOT_PORT" > "$TMP/knot.conf"
cat >> "$TMP/knot.conf" <<KNOT
remote:
  - id: authd
    address: 127.0.0.1@$AUTHD_PORT
acl:
  - id: from_authd
    address: 127.0.0.1
    action: [notify, transfer]
zone:
  - domain: $ZONE
    master: authd
    acl: from_authd
KNOT
knotd -c "$TMP/knot.conf" >"$TMP/knotd.out" 2>&1 &
PIDS+=($!)
named_conf_head "$NAMED_PORT" xfer-in > "$TMP/named.conf"
cat >> "$TMP/named.conf" <<EOF
zone "$ZONE" {
    type secondary;
    file "$ZONE.db";
    primaries { 127.0.0.1 port $AUTHD_PORT; };
    allow-transfer { 127.0.0.1; };
};
EOF
"$NAMED" -f -n 1 -c "$TMP/named.conf" >"$TMP/named.out" 2>&1 &
PIDS+=($!)
wait_for 30 "Knot has serial 3" has_serial "$KNOT_PORT" "$ZONE" 3
wait_for 30 "named has serial 3" has_serial "$NAMED_PORT" "$ZONE" 3
verify_copy "$KNOT_PORT" first
verify_copy "$NAMED_PORT" first

# follow SERIAL STEP N: both secondaries reach SERIAL by IXFR (the Nth
# incoming IXFR in their logs) and their copies verify.
follow() {
  wait_for 10 "authd serves serial $1" has_serial "$AUTHD_PORT" "$ZONE" "$1"
  wait_for 30 "Knot has serial $1" has_serial "$KNOT_PORT" "$ZONE" "$1"
  wait_for 30 "named has serial $1" has_serial "$NAMED_PORT" "$ZONE" "$1"
  wait_for 10 "Knot logs IXFR number $3" \
    test "$(grep -c "IXFR, incoming.*finished" "$TMP/knot.log")" -ge "$3"
  wait_for 10 "named logs serial $1 transferred" grep -q "$ZONE/IN.*transferred serial $1" "$TMP/named.log"
  # Both asked for the difference, and authd answered it from its journal.
  wait_for 10 "authd served IXFR to $1 twice" \
    test "$(grep -c "IXFR of $ZONE. for 127.0.0.1: serial $(($1 - 1)) -> $1, " "$TMP/authd.log")" -ge 2
  verify_copy "$KNOT_PORT" "$2"
  verify_copy "$NAMED_PORT" "$2"
  compare "$KNOT_PORT" "$ZONE" SOA
}

# 3a. A dynamic update: the reply comes once the signed change is committed.
nsupdate <<EOF
server 127.0.0.1 $AUTHD_PORT
zone $ZONE.
update add _acme-challenge.$ZONE. 60 TXT "token-1"
update delete www.$ZONE. A
update add www.$ZONE. 300 A 192.0.2.3
send
EOF
follow 4 update 1

# 3b. Plain SQL with the sqlite3 shell: signed by authd's signer.
sqlite3 -bail "$DB" <<'EOF'
INSERT INTO records (zone_id, name, rname, ttl, rdtype, sigtype, rdata)
  SELECT id, 'sql.example.org.', 'org.example.sql.', 300, 'A', NULL, '192.0.2.77'
  FROM zones WHERE name = 'example.org.';
DELETE FROM records WHERE name = 'mail.example.org.' AND rdtype = 'A';
EOF
follow 5 sql 2
compare "$KNOT_PORT" sql.$ZONE A

# 3c. zone update.
"$BIN/zone" update --db "$DB" "$ZONE" --delete "@ MX 10 mail" --add "ftp 600 AAAA 2001:db8::21"
follow 6 zone-update 3
compare "$NAMED_PORT" ftp.$ZONE AAAA

# 3d. A CSK rollover: the new CSK signs beside the old (serial 7), then,
# the DS confirmed at the parent, the old one is retired (serial 8).
"$BIN/authc" --socket "$TMP/control.sock" dnssec rollover "$ZONE." ksk
follow 7 csk-double 4
[ "$(dig +short @127.0.0.1 -p "$KNOT_PORT" "$ZONE." CDS | wc -l)" = 2 ] \
  || fail "Knot's copy does not carry both CDS during the rollover"
"$BIN/authc" --socket "$TMP/control.sock" dnssec ds-published "$ZONE."
follow 8 csk-retired 5
[ "$(dig +short @127.0.0.1 -p "$NAMED_PORT" "$ZONE." CDS | wc -l)" = 1 ] \
  || fail "named's copy does not carry only the new CDS after the rollover"
"$BIN/authc" --socket "$TMP/control.sock" dnssec status "$ZONE."

echo "--- Knot log (transfers)"
grep -E "AXFR|IXFR" "$TMP/knot.log"
echo "--- named log (transfers)"
grep -E "transfer|IXFR" "$TMP/named.log"
echo "OK: Knot and named followed a zone authd signs online by IXFR (UPDATE, SQL, zone update, CSK rollover); every copy verifies"
