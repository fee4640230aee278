#!/usr/bin/env bash
# Interop: zone transfers over TLS (XoT, RFC 9103) with BIND 9 and NSD, both
# ways, certificates verified (strict TLS, RFC 9103 §9.3.3).
#
#   1. openssl makes a CA and a server certificate for ns1.example.net (and
#      127.0.0.1), which authd and named both present;
#   2. authd serves example.org from an sqlite3 DB, TLS on AUTHD_TLS_PORT,
#      transfers allowed from 127.0.0.1 over TLS only ("127.0.0.1 tls");
#      NOTIFY to named and NSD;
#   3. named (primaries { … tls strict; }, ca-file, remote-hostname) and NSD
#      (request-xfr … NOKEY tls-auth with auth-domain-name, tls-cert-bundle)
#      transfer example.org from authd over TLS; a plain-TCP AXFR is refused;
#   4. a `zone update`: NOTIFY, and both catch up by IXFR over TLS;
#   5. named is also an XoT primary (listen-on … tls, allow-transfer transport
#      tls) of example.net, which authd follows over TLS with named's
#      certificate verified ("ADDR:PORT tls ns1.example.net", [tls] ca);
#   6. kdig +tls answers from authd with the certificate verified.
#
# Everything runs on 127.0.0.1 with unprivileged ports and a temporary
# folder; processes are stopped by PID; every wait is bounded
# (tests/interop/common.sh). Installs bind9, nsd, knot-dnsutils, openssl and
# dnsutils with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25410}"
AUTHD_TLS_PORT="${AUTHD_TLS_PORT:-25411}"
NAMED_PORT="${NAMED_PORT:-25464}"
NAMED_TLS_PORT="${NAMED_TLS_PORT:-25465}"
NSD_PORT="${NSD_PORT:-25493}"

. tests/interop/common.sh
install_missing named=bind9 nsd=nsd kdig=knot-dnsutils openssl=openssl dig=dnsutils
NAMED="$(command -v named)"

# 1. The certificates.
PKI="$TMP/pki"
mkdir -p "$PKI"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -keyout "$PKI/ca.key" -out "$PKI/ca.pem" -subj "/CN=authd interop CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout "$PKI/server.key" -out "$PKI/server.csr" -subj "/CN=ns1.example.net" 2>/dev/null
printf 'subjectAltName=DNS:ns1.example.net,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' \
  > "$PKI/server.ext"
openssl x509 -req -in "$PKI/server.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" -CAcreateserial \
  -days 2 -extfile "$PKI/server.ext" -out "$PKI/server.crt" 2>/dev/null
# named and nsd read their own copies (they may check ownership and mode).
chmod 0644 "$PKI"/*

# 2. authd: primary of example.org over TLS only, secondary of example.net
#    from named over TLS.
DB="$TMP/zones.sqlite3"
"$BIN/zone" create --db "$DB" example.org --ns ns1.example.org. --serial 1
"$BIN/zone" update --db "$DB" example.org --add "ns1 3600 A 192.0.2.1" --add "www 300 A 192.0.2.1"
cat > "$TMP/authd.toml" <<EOF
listen = ["127.0.0.1:$AUTHD_PORT"]
[[datasource]]
type = "sqlite3"
file = "$DB"
[transfer]
allow = ["127.0.0.1 tls"]
[notify]
targets = ["127.0.0.1:$NAMED_PORT", "127.0.0.1:$NSD_PORT"]
[tls]
certificate = "$PKI/server.crt"
key = "$PKI/server.key"
listen = ["127.0.0.1:$AUTHD_TLS_PORT"]
ca = "$PKI/ca.pem"
[[secondary]]
zone = "example.net."
primaries = ["127.0.0.1:$NAMED_TLS_PORT tls ns1.example.net"]
file = "$TMP/secondary.sqlite3"
min_refresh = 1
EOF
start_authd
wait_for 10 "authd listening on TLS" grep -q "listening on 127.0.0.1:$AUTHD_TLS_PORT (TLS" "$TMP/authd.log"

# 3. named: secondary of example.org from authd over TLS (strict), and XoT
#    primary of example.net.
named_conf_head "$NAMED_PORT" xfer-in xfer-out > "$TMP/named.conf"
sed -i "s|^    listen-on-v6 { none; };|&\n    listen-on port $NAMED_TLS_PORT tls local { 127.0.0.1; };|" "$TMP/named.conf"
cat > "$TMP/named/example.net.db" <<EOF
\$TTL 300
@ SOA ns1 hostmaster 7 3600 900 1209600 60
@ NS ns1
ns1 A 192.0.2.7
www A 192.0.2.77
EOF
cat >> "$TMP/named.conf" <<EOF
tls local { cert-file "$PKI/server.crt"; key-file "$PKI/server.key"; };
tls authd-strict { ca-file "$PKI/ca.pem"; remote-hostname "ns1.example.net"; };
zone "example.org" {
    type secondary;
    file "example.org.db";
    primaries { 127.0.0.1 port $AUTHD_TLS_PORT tls authd-strict; };
    allow-notify { 127.0.0.1; };
};
zone "example.net" {
    type primary;
    file "example.net.db";
    allow-transfer transport tls { 127.0.0.1; };
};
EOF
"$NAMED" -f -n 1 -c "$TMP/named.conf" >"$TMP/named.out" 2>&1 &
PIDS+=($!)

# NSD: secondary of example.org from authd over TLS (strict).
nsd_conf_head "$NSD_PORT" > "$TMP/nsd.conf"
cat >> "$TMP/nsd.conf" <<EOF
    tls-cert-bundle: "$PKI/ca.pem"
remote-control:
    control-enable: no
tls-auth:
    name: "authd"
    auth-domain-name: "ns1.example.net"
zone:
    name: "example.org"
    zonefile: "example.org.zone"
    request-xfr: 127.0.0.1@$AUTHD_TLS_PORT NOKEY authd
    allow-notify: 127.0.0.1 NOKEY
EOF
nsd -d -c "$TMP/nsd.conf" >"$TMP/nsd.out" 2>&1 &
PIDS+=($!)

wait_for 30 "named has example.org serial 2" has_serial "$NAMED_PORT" example.org 2
wait_for 30 "NSD has example.org serial 2" has_serial "$NSD_PORT" example.org 2
wait_for 10 "named logs the transfer over TLS" \
  grep -q "transfer of 'example.org/IN' from 127.0.0.1#$AUTHD_TLS_PORT: Transfer completed" "$TMP/named.log"
wait_for 10 "authd logs the AXFRs over TLS" grep -q "AXFR of example.org. serial 2 for 127.0.0.1: full zone" "$TMP/authd.log"
compare "$NAMED_PORT" www.example.org A
compare "$NSD_PORT" www.example.org A

# No plain-TCP transfer: the ACL entry requires TLS.
plain="$(dig +tcp +time=3 +tries=1 @127.0.0.1 -p "$AUTHD_PORT" example.org AXFR)"
echo "$plain" | grep -q "Transfer failed" || fail "a plain-TCP AXFR was not refused: $plain"
wait_for 5 "authd says why" grep -q "AXFR of example.org. refused for 127.0.0.1, unsigned (not in \[transfer\] allow over TLS only)" "$TMP/authd.log"

# 4. A change: NOTIFY, IXFR over TLS to both.
"$BIN/zone" update --db "$DB" example.org --delete "www A 192.0.2.1" --add "www 300 A 192.0.2.2"
wait_for 20 "named has example.org serial 3" has_serial "$NAMED_PORT" example.org 3
wait_for 20 "NSD has example.org serial 3" has_serial "$NSD_PORT" example.org 3
[ "$(grep -c "IXFR of example.org. for 127.0.0.1: serial 2 -> 3" "$TMP/authd.log")" -ge 2 ] ||
  fail "authd did not serve both secondaries IXFR 2 -> 3"
compare "$NAMED_PORT" www.example.org A
compare "$NSD_PORT" www.example.org A

# 5. authd follows example.net from named over TLS, named's certificate verified.
wait_for 30 "authd has example.net serial 7" has_serial "$AUTHD_PORT" example.net 7
grep -q "example.net.: AXFR from 127.0.0.1:$NAMED_TLS_PORT tls ns1.example.net" "$TMP/authd.log" ||
  fail "authd did not log the AXFR from named over TLS"
compare "$NAMED_PORT" www.example.net A

# 6. DoT from authd, certificate verified by kdig.
a="$(kdig @127.0.0.1 -p "$AUTHD_TLS_PORT" +tls-ca="$PKI/ca.pem" +tls-hostname=ns1.example.net \
  +timeout=5 +retry=0 www.example.org A)"
echo "$a" | grep -q "status: NOERROR" && echo "$a" | grep -q "192.0.2.2" ||
  fail "kdig over TLS: $a"

echo "--- named log (transfers)"
grep -E "transfer of|Transfer" "$TMP/named.log"
echo "--- NSD log (transfers)"
grep -iE "xfr|tls" "$TMP/nsd.log" | head -20
echo "--- authd log (transfers)"
grep -E "XFR|xfr|NOTIFY|TLS" "$TMP/authd.log"
echo "OK: named and NSD transferred example.org from authd over TLS (AXFR, IXFR after NOTIFY), a plain-TCP AXFR was refused, authd followed example.net from named over TLS, kdig +tls verified authd's certificate"
