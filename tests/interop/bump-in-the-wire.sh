#!/usr/bin/env bash
# Interop: authd as a bump-in-the-wire signer (issue 25): BIND 9 is the
# hidden primary of an unsigned zone, authd its secondary signing it online
# (`[[secondary]]` + `[[signing.zone]]`, KSK+ZSK, NSEC), Knot DNS the
# secondary of authd.
#
#   1. named serves example.net unsigned (serial 1); authd transfers it
#      (AXFR), signs it keeping serial 1, and NOTIFYs Knot, which transfers
#      it; both copies pass dnssec-verify and ldns-verify-zone;
#   2. an UPDATE on named (serial 2): NOTIFY, authd catches up by IXFR
#      (1 -> 2), signs the difference at the changed names and serves
#      serial 2; Knot follows by IXFR from authd's journal;
#   3. a ZSK rollover in authd (`authc dnssec rollover zsk`) moves the signed
#      zone to serial 4, past named's 2; named's next change (its serial 3)
#      is asked for from 2 (authd keeps the primary's serial apart) and
#      served as 5;
#   4. authd restarted: named's next change (4) is asked for from 3, read
#      back from the DB, and served as 6; Knot follows each by IXFR, and
#      every copy verifies.
#
# Everything runs on 127.0.0.1 with unprivileged ports and a temporary folder;
# processes are stopped by PID; every wait is bounded (tests/interop/common.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25420}"
NAMED_PORT="${NAMED_PORT:-25421}"
KNOT_PORT="${KNOT_PORT:-25422}"
ZONE=example.net

. tests/interop/common.sh
install_missing knotd=knot named=bind9 dig=dnsutils nsupdate=dnsutils \
  dnssec-verify=bind9-utils ldns-verify-zone=ldnsutils
NAMED="$(command -v named)"

# verify_copy PORT STEP: an AXFR from the server on PORT passes both validators.
verify_copy() {
  local file="$TMP/$2-$1.zone"
  dig +onesoa +nocmd +nostats +nocomments @127.0.0.1 -p "$1" "$ZONE." AXFR > "$file"
  grep -q RRSIG "$file" || fail "$2: the copy on port $1 is not signed"
  dnssec-verify -q -o "$ZONE." "$file" || fail "$2: dnssec-verify fails on the copy on port $1"
  ldns-verify-zone "$file" >/dev/null || fail "$2: ldns-verify-zone fails on the copy on port $1"
  echo "$2: the copy on port $1 verifies ($(grep -c RRSIG "$file") RRSIGs)"
}

# 1. The hidden primary, unsigned, taking updates from 127.0.0.1.
mkdir -p "$TMP/named"
cat > "$TMP/named/$ZONE.db" <<EOF
\$ORIGIN $ZONE.
\$TTL 300
@ SOA ns1 hostmaster 1 3600 900 1209600 60
@ NS ns1
ns1 A 192.0.2.1
www A 192.0.2.1
mail A 192.0.2.25
@ MX 10 mail
EOF
named_conf_head "$NAMED_PORT" xfer-out > "$TMP/named.conf"
cat >> "$TMP/named.conf" <<EOF
zone "$ZONE" {
    type primary;
    file "$ZONE.db";
    allow-transfer { 127.0.0.1; };
    allow-update { 127.0.0.1; };
    notify explicit;
    max-ixfr-ratio unlimited;
    also-notify { 127.0.0.1 port $AUTHD_PORT; };
};
EOF
"$NAMED" -f -n 1 -c "$TMP/named.conf" >"$TMP/named.out" 2>&1 &
PIDS+=($!)
wait_for 20 "named serves $ZONE" has_serial "$NAMED_PORT" "$ZONE" 1
dig +dnssec +norec @127.0.0.1 -p "$NAMED_PORT" "www.$ZONE" A | grep -q RRSIG &&
  fail "named's zone is signed; it must be the unsigned input"

# authd: secondary of named, signing the zone, primary of Knot.
cat > "$TMP/authd.toml" <<EOF
listen = ["127.0.0.1:$AUTHD_PORT"]
[[secondary]]
zone = "$ZONE."
primaries = ["127.0.0.1:$NAMED_PORT"]
file = "$TMP/signed.sqlite3"
[transfer]
allow = ["127.0.0.1"]
[notify]
targets = ["127.0.0.1:$KNOT_PORT"]
[control]
socket = "$TMP/control.sock"
[signing]
keys = "ksk+zsk"
denial = "nsec"
dnskey_ttl = 1
propagation_delay = 1
[[signing.zone]]
origin = "$ZONE."
EOF
start_authd
AUTHD_PID=${PIDS[-1]}
wait_for 20 "authd serves $ZONE serial 1" has_serial "$AUTHD_PORT" "$ZONE" 1
grep -q "$ZONE.: AXFR from 127.0.0.1:$NAMED_PORT" "$TMP/authd.log" || fail "no AXFR from named"
verify_copy "$AUTHD_PORT" first

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
wait_for 30 "Knot has serial 1" has_serial "$KNOT_PORT" "$ZONE" 1
verify_copy "$KNOT_PORT" first
# authd's NOTIFY poller learns the serials on its first look: let it look.
sleep 2

# change N COMMANDS: an UPDATE of named, which then serves serial N.
change() {
  local serial="$1"
  shift
  printf 'server 127.0.0.1 %s\nzone %s.\n%s\nsend\n' "$NAMED_PORT" "$ZONE" "$*" | nsupdate
  wait_for 10 "named serves serial $serial" has_serial "$NAMED_PORT" "$ZONE" "$serial"
}

# follow FROM TO SERVED STEP N: authd catches up with named by IXFR from
# named's serial FROM to TO and serves the signed zone as SERVED; Knot
# follows by IXFR (its Nth) and both copies verify.
follow() {
  wait_for 20 "authd serves serial $3" has_serial "$AUTHD_PORT" "$ZONE" "$3"
  grep -q "$ZONE.: IXFR from 127.0.0.1:$NAMED_PORT: serial $1 -> $2, 1 difference" "$TMP/authd.log" ||
    fail "$4: authd did not catch up with named by IXFR $1 -> $2"
  wait_for 30 "Knot has serial $3" has_serial "$KNOT_PORT" "$ZONE" "$3"
  wait_for 10 "Knot logs IXFR number $5" \
    test "$(grep -c "IXFR, incoming.*finished" "$TMP/knot.log")" -ge "$5"
  verify_copy "$AUTHD_PORT" "$4"
  verify_copy "$KNOT_PORT" "$4"
  compare "$KNOT_PORT" "$ZONE" SOA
}

# 2. A change on the hidden primary.
change 2 "update delete www.$ZONE. A
update add www.$ZONE. 300 A 192.0.2.2
update add new.$ZONE. 300 TXT \"two\""
follow 1 2 2 update 1
compare "$KNOT_PORT" "new.$ZONE" TXT
dig +dnssec +norec @127.0.0.1 -p "$AUTHD_PORT" "new.$ZONE" TXT | grep -q "RRSIG" ||
  fail "new.$ZONE TXT is served unsigned"

# 3. Re-signing moves authd's serial past named's: a ZSK rollover publishes
# the new key (3), then, the DNSKEY TTL and propagation delay (1 s each)
# later, signs with it (4); the old key stays published for the zone's
# largest TTL (300 s), past this test.
"$BIN/authc" --socket "$TMP/control.sock" dnssec rollover "$ZONE." zsk
wait_for 20 "authd serves serial 4 (new ZSK active)" has_serial "$AUTHD_PORT" "$ZONE" 4
wait_for 30 "Knot has serial 4" has_serial "$KNOT_PORT" "$ZONE" 4
has_serial "$NAMED_PORT" "$ZONE" 2 || fail "named's serial moved"
change 3 "update add three.$ZONE. 300 A 192.0.2.3"
follow 2 3 5 after-rollover 4
compare "$KNOT_PORT" "three.$ZONE" A

# 4. A restart: the primary's serial is read back from the DB.
kill "$AUTHD_PID"
wait "$AUTHD_PID" 2>/dev/null || true
mv "$TMP/authd.log" "$TMP/authd-first.log"
start_authd
wait_for 20 "authd serves serial 5 again" has_serial "$AUTHD_PORT" "$ZONE" 5
grep -q "secondary zone $ZONE.: serial 3," "$TMP/authd.log" ||
  fail "authd did not read back named's serial 3 at start"
sleep 2
change 4 "update delete mail.$ZONE. A
update delete $ZONE. MX"
follow 3 4 6 after-restart 5
dig +norec @127.0.0.1 -p "$AUTHD_PORT" "mail.$ZONE" A | grep -q "status: NXDOMAIN" ||
  fail "mail.$ZONE is still there"
"$BIN/authc" --socket "$TMP/control.sock" dnssec status "$ZONE."

echo "--- authd log (transfers)"
cat "$TMP/authd-first.log" "$TMP/authd.log" | grep -E "AXFR|IXFR|signing"
echo "OK: authd signed the zone BIND 9 serves unsigned, followed it by IXFR past its own re-signing and a restart, and Knot followed authd by IXFR; every copy verifies"
