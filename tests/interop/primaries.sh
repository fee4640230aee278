#!/usr/bin/env bash
# Interop: authd follows Knot DNS and BIND 9 as their secondary (issue 17),
# with TSIG on every SOA query, transfer and NOTIFY.
#
#   1. Knot is primary of example.org (SOA refresh 2 s, retry 1 s, expire
#      8 s), named of example.net (refresh an hour); both allow transfers only
#      with the key xfr-key. and send signed NOTIFYs to authd;
#   2. authd (`[[secondary]]` for both zones, one DB) transfers each by AXFR
#      and answers as the primaries do;
#   3. a change on each primary (knotc zone transaction; nsupdate on named):
#      NOTIFY, then authd catches up by incremental IXFR (its log says so)
#      and answers the changed name as the primary does;
#      named, secondary of authd for example.org, follows it by IXFR from
#      authd's journal (the chain Knot -> authd -> BIND 9);
#   4. Knot stopped: authd keeps serving example.org until EXPIRE, then
#      SERVFAIL; Knot back: served again.
#
# Everything runs on 127.0.0.1 with unprivileged ports (AUTHD_PORT, KNOT_PORT,
# NAMED_PORT) and a temporary folder; processes are stopped by PID; every
# wait is bounded (tests/interop/common.sh). Installs knot, bind9, dnsutils
# and sqlite3 with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25320}"
KNOT_PORT="${KNOT_PORT:-25373}"
NAMED_PORT="${NAMED_PORT:-25374}"

. tests/interop/common.sh
install_missing knotd=knot named=bind9 dig=dnsutils nsupdate=dnsutils sqlite3=sqlite3
NAMED="$(command -v named)"

tsig_key xfr-key.

# 1. The primaries (named is also the downstream secondary of example.org).
cat > "$TMP/example.org.zone" <<EOF
\$ORIGIN example.org.
\$TTL 300
@ SOA ns1 hostmaster 1 2 1 8 60
@ NS ns1
ns1 A 192.0.2.1
www A 192.0.2.1
mail MX 10 ns1
EOF
knot_conf_head "$KNOT_PORT" > "$TMP/knot.conf"
cat >> "$TMP/knot.conf" <<EOF
key:
  - id: xfr-key.
    algorithm: hmac-sha256
    secret: $SECRET
remote:
  - id: authd
    address: 127.0.0.1@$AUTHD_PORT
    key: xfr-key.
acl:
  - id: transfer_to_authd
    address: 127.0.0.1
    key: xfr-key.
    action: transfer
zone:
  - domain: example.org
    file: "$TMP/example.org.zone"
    zonefile-load: whole
    journal-content: changes
    notify: authd
    acl: transfer_to_authd
  # No NOTIFY for this one: authd must catch up by its refresh timer.
  - domain: example.com
    file: "$TMP/example.com.zone"
    zonefile-load: whole
    journal-content: changes
    acl: transfer_to_authd
EOF
sed -e 's/example\.org\./example.com./' "$TMP/example.org.zone" > "$TMP/example.com.zone"
start_knot() {
  knotd -c "$TMP/knot.conf" >>"$TMP/knotd.out" 2>&1 &
  KNOT_PID=$!
  PIDS+=($KNOT_PID)
  wait_for 20 "Knot serves example.org" has_serial "$KNOT_PORT" example.org "$1"
}
start_knot 1

mkdir -p "$TMP/named"
cat > "$TMP/named/example.net.db" <<EOF
\$ORIGIN example.net.
\$TTL 300
@ SOA ns1 hostmaster 1 3600 900 1209600 60
@ NS ns1
ns1 A 192.0.2.1
www A 192.0.2.1
EOF
named_conf_head "$NAMED_PORT" xfer-out xfer-in > "$TMP/named.conf"
cat >> "$TMP/named.conf" <<EOF
key "xfr-key." { algorithm hmac-sha256; secret "$SECRET"; };
zone "example.net" {
    type primary;
    file "example.net.db";
    allow-transfer { key "xfr-key."; };
    allow-update { key "xfr-key."; };
    notify explicit;
    max-ixfr-ratio unlimited;
    also-notify { 127.0.0.1 port $AUTHD_PORT key "xfr-key."; };
};
zone "example.org" {
    type secondary;
    file "example.org.db";
    primaries { 127.0.0.1 port $AUTHD_PORT key "xfr-key."; };
    allow-notify { key "xfr-key."; };
};
EOF

# 2. authd, secondary of both, with the key.
echo "listen = [\"127.0.0.1:$AUTHD_PORT\"]" > "$TMP/authd.toml"
cat "$TMP/key.toml" >> "$TMP/authd.toml"
cat >> "$TMP/authd.toml" <<EOF
[[secondary]]
zone = "example.org."
primaries = ["127.0.0.1:$KNOT_PORT key xfr-key."]
file = "$TMP/secondary.sqlite3"
min_refresh = 1
[[secondary]]
zone = "example.com."
primaries = ["127.0.0.1:$KNOT_PORT key xfr-key."]
file = "$TMP/secondary.sqlite3"
min_refresh = 1
[[secondary]]
zone = "example.net."
primaries = ["127.0.0.1:$NAMED_PORT key xfr-key."]
file = "$TMP/secondary.sqlite3"
min_refresh = 1
[transfer]
allow = ["key xfr-key."]
[[notify.zone]]
origin = "example.org."
targets = ["127.0.0.1:$NAMED_PORT key xfr-key."]
EOF
start_authd
wait_for 20 "authd has example.org serial 1" has_serial "$AUTHD_PORT" example.org 1
# named after authd, so its first refresh of example.org finds authd serving it.
"$NAMED" -f -n 1 -c "$TMP/named.conf" >"$TMP/named.out" 2>&1 &
PIDS+=($!)
wait_for 20 "named serves example.net" has_serial "$NAMED_PORT" example.net 1
wait_for 20 "named (secondary of authd) has example.org serial 1" has_serial "$NAMED_PORT" example.org 1
wait_for 20 "authd has example.net serial 1" has_serial "$AUTHD_PORT" example.net 1
grep -q "example.org.: AXFR from 127.0.0.1:$KNOT_PORT key xfr-key." "$TMP/authd.log" ||
  fail "authd did not log the AXFR from Knot"
grep -q "example.net.: AXFR from 127.0.0.1:$NAMED_PORT key xfr-key." "$TMP/authd.log" ||
  fail "authd did not log the AXFR from named"
compare "$KNOT_PORT" www.example.org A
compare "$KNOT_PORT" mail.example.org MX
compare "$KNOT_PORT" example.org SOA
compare "$NAMED_PORT" www.example.net A
compare "$NAMED_PORT" example.net SOA

# 3. Changes: NOTIFY (signed), then incremental IXFR. authd's NOTIFY poller
# learns the serials on its first look (1 s after start) and announces only
# later changes: let it look first.
sleep 2
knotc -c "$TMP/knot.conf" zone-begin example.org >/dev/null
knotc -c "$TMP/knot.conf" zone-unset example.org www A 192.0.2.1 >/dev/null
knotc -c "$TMP/knot.conf" zone-set example.org www 300 A 192.0.2.2 >/dev/null
knotc -c "$TMP/knot.conf" zone-commit example.org >/dev/null
wait_for 20 "authd has example.org serial 2" has_serial "$AUTHD_PORT" example.org 2
printf 'server 127.0.0.1 %s\nzone example.net\nupdate delete www.example.net A\nupdate add www.example.net 300 A 192.0.2.2\nsend\n' \
  "$NAMED_PORT" | nsupdate -y "hmac-sha256:xfr-key.:$SECRET"
wait_for 20 "authd has example.net serial 2" has_serial "$AUTHD_PORT" example.net 2
grep -q "example.net.: NOTIFY received" "$TMP/authd.log" || fail "no NOTIFY from named"
grep -q "example.org.: IXFR from 127.0.0.1:$KNOT_PORT key xfr-key.: serial 1 -> 2, 1 difference" \
  "$TMP/authd.log" || fail "authd did not catch up with Knot by incremental IXFR"
grep -q "example.net.: IXFR from 127.0.0.1:$NAMED_PORT key xfr-key.: serial 1 -> 2, 1 difference" \
  "$TMP/authd.log" || fail "authd did not catch up with named by incremental IXFR"
compare "$KNOT_PORT" www.example.org A
compare "$NAMED_PORT" www.example.net A
# A change with no NOTIFY (Knot sends none for example.com): authd catches
# up when the SOA refresh (2 s) comes round, by incremental IXFR.
wait_for 20 "authd has example.com serial 1" has_serial "$AUTHD_PORT" example.com 1
knotc -c "$TMP/knot.conf" zone-begin example.com >/dev/null
knotc -c "$TMP/knot.conf" zone-set example.com new 300 A 192.0.2.7 >/dev/null
knotc -c "$TMP/knot.conf" zone-commit example.com >/dev/null
wait_for 20 "authd has example.com serial 2 by its refresh timer" has_serial "$AUTHD_PORT" example.com 2
grep -q "example.com.: NOTIFY received" "$TMP/authd.log" && fail "Knot sent a NOTIFY for example.com"
grep -q "example.com.: IXFR from 127.0.0.1:$KNOT_PORT key xfr-key.: serial 1 -> 2, 1 difference" \
  "$TMP/authd.log" || fail "authd did not catch up with Knot by IXFR on its refresh timer"
compare "$KNOT_PORT" new.example.com A
grep -q "TSIG" "$TMP/authd.log" && fail "authd logged a TSIG problem"
# The chain Knot -> authd -> named: authd's NOTIFY, then named's IXFR from
# authd's own journal.
wait_for 20 "named (secondary of authd) has example.org serial 2" has_serial "$NAMED_PORT" example.org 2
wait_for 10 "authd served named IXFR 1 -> 2" grep -q "IXFR of example.org. for 127.0.0.1: serial 1 -> 2" "$TMP/authd.log"
wait_for 10 "named logs the IXFR" grep -q "example.org/IN.*transferred serial 2: TSIG 'xfr-key'" "$TMP/named.log"
compare "$NAMED_PORT" www.example.org A

# 4. Knot stopped: served until EXPIRE (8 s), then SERVFAIL; back: served.
kill "$KNOT_PID"
wait "$KNOT_PID" 2>/dev/null || true
has_serial "$AUTHD_PORT" example.org 2 || fail "authd stopped serving at once"
servfail() { dig +norec +time=1 +tries=1 @127.0.0.1 -p "$AUTHD_PORT" www.example.org A | grep -q "status: SERVFAIL"; }
wait_for 30 "example.org expires (SERVFAIL)" servfail
grep -q "example.org.: no primary answered for the SOA EXPIRE" "$TMP/authd.log" || fail "no expire log line"
has_serial "$AUTHD_PORT" example.net 2 || fail "example.net stopped being served"
start_knot 2
wait_for 20 "example.org served again" has_serial "$AUTHD_PORT" example.org 2
compare "$KNOT_PORT" www.example.org A

echo "--- authd log (secondary)"
grep -E "secondary zone|NOTIFY" "$TMP/authd.log"
echo "OK: authd followed Knot and BIND 9 with TSIG (AXFR, NOTIFY, incremental IXFR; the refresh timer without NOTIFY), fed named by IXFR, expired without its primary and recovered"
