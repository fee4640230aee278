#!/usr/bin/env bash
# Interop: authd follows NSD as its secondary, with TSIG (issue 17).
#
#   1. NSD is primary of example.com (transfers only with the key xfr-key.,
#      signed NOTIFY to authd);
#   2. authd transfers it by AXFR and answers as NSD does;
#   3. the zone file changes and NSD reloads it (SIGHUP): NSD's NOTIFY, then
#      authd's IXFR, which NSD 4.6 answers AXFR-style (it keeps no
#      differences); authd answers the changed name as NSD does.
#
# Everything runs on 127.0.0.1 with unprivileged ports (AUTHD_PORT, NSD_PORT)
# and a temporary folder; processes are stopped by PID; every wait is bounded
# (tests/interop/common.sh). Installs nsd and dnsutils with apt-get when
# missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25340}"
NSD_PORT="${NSD_PORT:-25393}"

. tests/interop/common.sh
install_missing nsd=nsd dig=dnsutils
tsig_key xfr-key.

zone() { # SERIAL ADDRESS
  cat > "$TMP/nsd/example.com.zone" <<EOF
\$ORIGIN example.com.
\$TTL 300
@ SOA ns1 hostmaster $1 3600 900 1209600 60
@ NS ns1
ns1 A 192.0.2.1
www A $2
EOF
}
mkdir -p "$TMP/nsd"
zone 1 192.0.2.1
nsd_conf_head "$NSD_PORT" > "$TMP/nsd.conf"
cat >> "$TMP/nsd.conf" <<EOF
remote-control:
    control-enable: no
key:
    name: "xfr-key."
    algorithm: hmac-sha256
    secret: "$SECRET"
zone:
    name: "example.com"
    zonefile: "example.com.zone"
    provide-xfr: 127.0.0.1 xfr-key.
    notify: 127.0.0.1@$AUTHD_PORT xfr-key.
EOF
nsd -d -c "$TMP/nsd.conf" >"$TMP/nsd.out" 2>&1 &
NSD_PID=$!
PIDS+=($NSD_PID)
wait_for 20 "NSD serves example.com" has_serial "$NSD_PORT" example.com 1

echo "listen = [\"127.0.0.1:$AUTHD_PORT\"]" > "$TMP/authd.toml"
cat "$TMP/key.toml" >> "$TMP/authd.toml"
cat >> "$TMP/authd.toml" <<EOF
[[secondary]]
zone = "example.com."
primaries = ["127.0.0.1:$NSD_PORT key xfr-key."]
file = "$TMP/secondary.sqlite3"
min_refresh = 1
EOF
start_authd
wait_for 20 "authd has example.com serial 1" has_serial "$AUTHD_PORT" example.com 1
grep -q "example.com.: AXFR from 127.0.0.1:$NSD_PORT key xfr-key." "$TMP/authd.log" ||
  fail "authd did not log the AXFR from NSD"
compare "$NSD_PORT" www.example.com A
compare "$NSD_PORT" example.com SOA

zone 2 192.0.2.2
kill -HUP "$NSD_PID"
wait_for 20 "authd has example.com serial 2" has_serial "$AUTHD_PORT" example.com 2
grep -q "example.com.: NOTIFY received" "$TMP/authd.log" || fail "no NOTIFY from NSD"
grep -q "example.com.: IXFR (AXFR-style) from 127.0.0.1:$NSD_PORT key xfr-key.: serial 1 -> 2" \
  "$TMP/authd.log" || fail "authd did not catch up with NSD by IXFR (AXFR-style)"
compare "$NSD_PORT" www.example.com A
grep -q "TSIG" "$TMP/authd.log" && fail "authd logged a TSIG problem"

echo "--- authd log (secondary)"
grep -E "secondary zone|NOTIFY" "$TMP/authd.log"
echo "OK: authd followed NSD with TSIG (AXFR, signed NOTIFY, catch-up after a reload)"
