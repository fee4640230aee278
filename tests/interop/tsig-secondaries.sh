#!/usr/bin/env bash
# Interop: Knot DNS and BIND 9 follow zones from authd under TSIG (RFC 8945).
#
#   1. authd serves example.org and example.net from an sqlite3 DB; transfers
#      are allowed only with the key xfr-key. (`[transfer] allow = ["key
#      xfr-key."]`); NOTIFY for example.org goes to both secondaries, signed;
#   2. Knot and named are secondaries of example.org with the key (their SOA
#      queries and transfers signed) and of example.net without it;
#   3. both transfer example.org by AXFR, signed, and are refused example.net
#      (authd logs the refusal of an unsigned AXFR; neither has the zone);
#   4. a `zone update` bumps example.org; authd sends both a signed NOTIFY, and
#      verifies their signed replies; both catch up by IXFR and answer the
#      changed name exactly as authd does.
#
# Everything runs on 127.0.0.1 with unprivileged ports (AUTHD_PORT, KNOT_PORT,
# NAMED_PORT) and a temporary folder; processes are stopped by PID; every
# wait is bounded (tests/interop/common.sh). Installs knot, bind9, dnsutils
# and sqlite3 with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25310}"
KNOT_PORT="${KNOT_PORT:-25363}"
NAMED_PORT="${NAMED_PORT:-25364}"

. tests/interop/common.sh
install_missing knotd=knot named=bind9 dig=dnsutils sqlite3=sqlite3
NAMED="$(command -v named)"

# 1. The key, the zones and authd.
tsig_key xfr-key.
DB="$TMP/zones.sqlite3"
for zone in example.org example.net; do
  "$BIN/zone" create --db "$DB" "$zone" --ns "ns1.$zone." --serial 1
  "$BIN/zone" update --db "$DB" "$zone" --add "ns1 3600 A 192.0.2.1" --add "www 300 A 192.0.2.1"
done
echo "listen = [\"127.0.0.1:$AUTHD_PORT\"]" > "$TMP/authd.toml"
cat "$TMP/key.toml" >> "$TMP/authd.toml"
cat >> "$TMP/authd.toml" <<EOF
[[datasource]]
type = "sqlite3"
file = "$DB"
[transfer]
allow = ["key xfr-key."]
[[notify.zone]]
origin = "example.org."
targets = ["127.0.0.1:$KNOT_PORT key xfr-key.", "127.0.0.1:$NAMED_PORT key xfr-key."]
EOF
start_authd

# 2. Knot: example.org from authd with the key, example.net without.
knot_conf_head "$KNOT_PORT" > "$TMP/knot.conf"
cat >> "$TMP/knot.conf" <<EOF
key:
  - id: xfr-key.
    algorithm: hmac-sha256
    secret: $SECRET
remote:
  - id: authd_signed
    address: 127.0.0.1@$AUTHD_PORT
    key: xfr-key.
  - id: authd_unsigned
    address: 127.0.0.1@$AUTHD_PORT
acl:
  - id: notify_from_authd
    address: 127.0.0.1
    key: xfr-key.
    action: notify
zone:
  - domain: example.org
    master: authd_signed
    acl: notify_from_authd
  - domain: example.net
    master: authd_unsigned
EOF
knotd -c "$TMP/knot.conf" >"$TMP/knotd.out" 2>&1 &
PIDS+=($!)

# BIND 9: the same two zones.
named_conf_head "$NAMED_PORT" xfer-in > "$TMP/named.conf"
cat >> "$TMP/named.conf" <<EOF
key "xfr-key." { algorithm hmac-sha256; secret "$SECRET"; };
zone "example.org" {
    type secondary;
    file "example.org.db";
    primaries { 127.0.0.1 port $AUTHD_PORT key "xfr-key."; };
    allow-notify { key "xfr-key."; };
};
zone "example.net" {
    type secondary;
    file "example.net.db";
    primaries { 127.0.0.1 port $AUTHD_PORT; };
};
EOF
"$NAMED" -f -n 1 -c "$TMP/named.conf" >"$TMP/named.out" 2>&1 &
PIDS+=($!)

# 3. Both transfer example.org (AXFR, signed) and are refused example.net.
wait_for 30 "Knot has example.org serial 2" has_serial "$KNOT_PORT" example.org 2
wait_for 30 "named has example.org serial 2" has_serial "$NAMED_PORT" example.org 2
wait_for 10 "Knot logs the AXFR" grep -q "example.org.*AXFR, incoming.*finished" "$TMP/knot.log"
wait_for 10 "named logs the signed AXFR" grep -q "example.org/IN.*transferred serial 2: TSIG 'xfr-key'" "$TMP/named.log"
wait_for 20 "authd refuses an unsigned AXFR of example.net" \
  grep -q "AXFR of example.net. refused for 127.0.0.1, unsigned" "$TMP/authd.log"
wait_for 20 "Knot logs the refusal" grep -qi "example.net.*AXFR, incoming.*\(refused\|failed\)" "$TMP/knot.log"
wait_for 20 "named logs the refusal" grep -q "example.net/IN.*REFUSED" "$TMP/named.log"
for port in "$KNOT_PORT" "$NAMED_PORT"; do
  [ -z "$(serial_at "$port" example.net)" ] || fail "the secondary on $port serves example.net without the key"
done
grep -q "TSIG: request from" "$TMP/authd.log" && fail "authd rejected a TSIG the secondaries signed"

compare "$KNOT_PORT" www.example.org A
compare "$NAMED_PORT" www.example.org A

# 4. A change: www A 192.0.2.1 -> 192.0.2.2, serial 2 -> 3; signed NOTIFY, IXFR.
"$BIN/zone" update --db "$DB" example.org --delete "www A 192.0.2.1" --add "www 300 A 192.0.2.2"
for port in "$KNOT_PORT" "$NAMED_PORT"; do
  wait_for 10 "authd's signed NOTIFY to $port answered and verified" grep -q \
    "NOTIFY of example.org. serial 3 to 127.0.0.1:$port: answered (rcode 0, try [0-9], signed with key xfr-key.)" \
    "$TMP/authd.log"
  wait_for 20 "the secondary on $port has serial 3" has_serial "$port" example.org 3
done
wait_for 10 "Knot logs an IXFR" grep -q "example.org.*IXFR, incoming.*finished" "$TMP/knot.log"
wait_for 10 "named logs the signed IXFR" grep -q "example.org/IN.*transferred serial 3: TSIG 'xfr-key'" "$TMP/named.log"
grep -q "received notify for zone 'example.org': TSIG 'xfr-key'" "$TMP/named.log" ||
  fail "named did not log the NOTIFY as signed"
[ "$(grep -c "IXFR of example.org. for 127.0.0.1: serial 2 -> 3" "$TMP/authd.log")" -ge 2 ] ||
  fail "authd did not serve both secondaries IXFR 2 -> 3"
compare "$KNOT_PORT" www.example.org A
compare "$NAMED_PORT" www.example.org A

echo "--- Knot log (transfers, NOTIFY)"
grep -E "AXFR|IXFR|notify|NOTIFY" "$TMP/knot.log"
echo "--- named log (transfers, NOTIFY)"
grep -E "transfer|notify|Transfer|REFUSED" "$TMP/named.log"
echo "--- authd log (transfers, NOTIFY)"
grep -E "xfr|notify|NOTIFY|TSIG" "$TMP/authd.log"
echo "OK: Knot and BIND transferred example.org with TSIG (AXFR, then IXFR after a signed NOTIFY) and were refused example.net without the key"
